// Hierarchical Dawid-Skene model (Paun et al. 2018; the variant in rater),
// marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   mu[k, k] ~ N(2, 1),  mu[k, k'] ~ N(0, 1) for k' != k
//   sigma[k, k'] ~ half-N(0, 1)
//   gamma[j, k, k'] = mu[k, k'] + sigma[k, k'] * gamma_raw[j, k, k'],  gamma_raw ~ N(0, 1)
//   theta[j, k] = softmax(gamma[j, k])
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// The raters' unconstrained error matrices gamma[j] are drawn around a
// population mean mu with scale sigma (non-centred parameterisation).
//
// Data layout: as in dawid_skene.stan (units with integer weights; the
// unit-by-(rater, rating) count matrix in CSR form (w, v, u)).
functions {
  // (J*K) x K matrix with entry [(j-1)*K + l, k] = log theta[j, k, l]
  // = log_softmax(gamma[j, k])[l].
  matrix log_theta_matrix(matrix mu, matrix sigma, array[] matrix gamma_raw) {
    int J = size(gamma_raw);
    int K = rows(mu);
    matrix[J * K, K] out;
    for (j in 1:J) {
      matrix[K, K] gamma = mu + sigma .* gamma_raw[j];
      for (k in 1:K) {
        out[((j - 1) * K + 1):(j * K), k] = log_softmax(gamma[k]');
      }
    }
    return out;
  }

  // Per-unit log-likelihood: log p(y_i), or log p(y_i, z_i = known[i]).
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
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
  vector[K * K] mu_loc = to_vector(add_diag(rep_matrix(0, K, K), 2));  // prior means of mu
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  matrix[K, K] mu;                          // population mean of the unconstrained error matrices
  matrix<lower=0>[K, K] sigma;              // population scale
  array[J] matrix[K, K] gamma_raw;          // standardised rater effects
}
model {
  target += dirichlet_lpdf(pi | alpha);
  target += normal_lpdf(to_vector(mu) | mu_loc, 1);
  target += normal_lpdf(to_vector(sigma) | 0, 1) + K * K * log2();   // half-normal
  for (j in 1:J) {
    target += std_normal_lpdf(to_vector(gamma_raw[j]));
  }
  target += dot_product(weight_v, unit_log_lik(log_theta_matrix(mu, sigma, gamma_raw), log(pi),
                                               w, v, u, known));
}
generated quantities {
  array[J, K] simplex[K] theta;             // theta[j, k, l] = P(rating l | class k, rater j)
  vector[write_log_lik ? I : 0] log_lik;    // log p(y_i) per unit
  for (j in 1:J) {
    matrix[K, K] gamma = mu + sigma .* gamma_raw[j];
    for (k in 1:K) {
      theta[j, k] = softmax(gamma[k]');
    }
  }
  if (write_log_lik) {
    log_lik = unit_log_lik(log_theta_matrix(mu, sigma, gamma_raw), log(pi), w, v, u, known);
  }
}
