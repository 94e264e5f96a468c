// Dawid-Skene model (Dawid & Skene 1979), marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   theta[j, k] ~ Dirichlet(beta[j, k])        (row k of rater j's error matrix)
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// theta[j, k, l] = P(rater j says l | true class k).  The discrete z_i are
// summed out so that NUTS can run; class probabilities are computed in Python
// from the draws (pyrater.kernel), not stored per draw.
//
// Data layout (shared by all pyrater programs; built by pyrater.stan_data):
// a "unit" is an item (long / wide data, weight 1) or a distinct rating
// pattern (grouped data, weight = tally).  The unit-by-(rater, rating) count
// matrix C (I x J*K, C[i, (j-1)*K + l] = number of times rater j gave rating l
// to unit i) is passed in compressed sparse row form (w, v, u) as used by
// csr_matrix_times_vector, so the unit log joint log p(y_i, z_i = k) is
//   log pi[k] + C[i] * log_theta_mat[:, k],   log_theta_mat[(j-1)*K + l, k] = log theta[j, k, l],
// i.e. K sparse products whose cost scales with the number of nonzeros.
// Any design is allowed: incomplete, unbalanced, repeated ratings.
functions {
  // (J*K) x K matrix with entry [(j-1)*K + l, k] = log theta[j, k, l].
  matrix log_theta_matrix(array[,] vector theta) {
    int J = dims(theta)[1];
    int K = dims(theta)[2];
    matrix[J * K, K] out;
    for (j in 1:J) {
      for (k in 1:K) {
        out[((j - 1) * K + 1):(j * K), k] = log(theta[j, k]);
      }
    }
    return out;
  }

  // Per-unit log-likelihood: log p(y_i) = log_sum_exp_k log p(y_i, z_i = k),
  // or log p(y_i, z_i = known[i]) for units whose class is known.
  vector unit_log_lik(matrix log_theta_mat, vector log_pi, data vector w,
                      data array[] int v, data array[] int u, data array[] int known) {
    int I = size(u) - 1;
    int K = cols(log_theta_mat);
    int JK = rows(log_theta_mat);
    matrix[I, K] lj;
    vector[I] ll;
    for (k in 1:K) {
      lj[:, k] = csr_matrix_times_vector(I, JK, w, v, u, log_theta_mat[:, k]) + log_pi[k];
    }
    for (i in 1:I) {
      ll[i] = known[i] == 0 ? log_sum_exp(lj[i]) : lj[i, known[i]];
    }
    return ll;
  }
}
data {
  int<lower=2> K;                           // number of categories
  int<lower=1> J;                           // number of raters
  int<lower=1> I;                           // number of units (items, or rating patterns)
  array[I] int<lower=0> weight;             // items per unit: 1 for items, the tally for patterns
  int<lower=1> nnz;                         // number of nonzero entries of the count matrix C
  vector<lower=0>[nnz] w;                   // CSR values: the counts C[i, c]
  array[nnz] int<lower=1, upper=J * K> v;   // CSR column indexes c = (j-1)*K + l (1-based)
  array[I + 1] int<lower=1, upper=nnz + 1> u;  // CSR row starts (1-based), u[I+1] = nnz + 1
  array[I] int<lower=0, upper=K> known;     // known true class of a unit (1..K), 0 = unknown
  vector<lower=0>[K] alpha;                 // Dirichlet prior on pi
  array[J, K] vector<lower=0>[K] beta;      // Dirichlet prior on row k of rater j's error matrix
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  array[J, K] simplex[K] theta;             // theta[j, k, l] = P(rating l | class k, rater j)
}
model {
  target += dirichlet_lpdf(pi | alpha);
  for (j in 1:J) {
    for (k in 1:K) {
      target += dirichlet_lpdf(theta[j, k] | beta[j, k]);
    }
  }
  target += dot_product(weight_v, unit_log_lik(log_theta_matrix(theta), log(pi), w, v, u, known));
}
generated quantities {
  // log p(y_i) per unit (per pattern for grouped data: multiply by weight for its items' total)
  vector[write_log_lik ? I : 0] log_lik;
  if (write_log_lik) {
    log_lik = unit_log_lik(log_theta_matrix(theta), log(pi), w, v, u, known);
  }
}
