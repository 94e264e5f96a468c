// Class-conditional Dawid-Skene model, marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   p[j, k] ~ Beta(beta1[k], beta2[k])
//   theta[j, k, k] = p[j, k],  theta[j, k, l] = (1 - p[j, k]) / (K - 1) for l != k
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// p[j, k] is rater j's accuracy on items of true class k; errors are spread
// evenly over the other categories.
//
// Data layout: as in dawid_skene.stan (units with integer weights; the
// unit-by-(rater, rating) count matrix in CSR form (w, v, u)).
functions {
  // (J*K) x K matrix with entry [(j-1)*K + l, k] = log theta[j, k, l].
  matrix log_theta_matrix(array[] vector p) {
    int J = size(p);
    int K = rows(p[1]);
    matrix[J * K, K] out;
    for (j in 1:J) {
      vector[K] log_right = log(p[j]);
      vector[K] log_wrong = log1m(p[j]) - log(K - 1);
      for (k in 1:K) {
        out[((j - 1) * K + 1):(j * K), k] = rep_vector(log_wrong[k], K);
        out[(j - 1) * K + k, k] = log_right[k];
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
  vector<lower=0>[K] beta1;                 // Beta prior on p[j, k]: first shape, per class
  vector<lower=0>[K] beta2;                 // Beta prior on p[j, k]: second shape, per class
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  array[J] vector<lower=0, upper=1>[K] p;   // p[j, k]: accuracy of rater j on class k
}
model {
  target += dirichlet_lpdf(pi | alpha);
  for (j in 1:J) {
    target += beta_lpdf(p[j] | beta1, beta2);
  }
  target += dot_product(weight_v, unit_log_lik(log_theta_matrix(p), log(pi), w, v, u, known));
}
generated quantities {
  array[J, K] simplex[K] theta;             // the implied error matrices
  vector[write_log_lik ? I : 0] log_lik;    // log p(y_i) per unit
  for (j in 1:J) {
    for (k in 1:K) {
      theta[j, k] = rep_vector((1 - p[j, k]) / (K - 1), K);
      theta[j, k, k] = p[j, k];
    }
  }
  if (write_log_lik) {
    log_lik = unit_log_lik(log_theta_matrix(p), log(pi), w, v, u, known);
  }
}
