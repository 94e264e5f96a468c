// Homogeneous Dawid-Skene model: one error matrix shared by all raters,
// marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   theta[k] ~ Dirichlet(beta[k])              (row k of the shared error matrix)
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[k])
//
// theta[k, l] = P(any rater says l | true class k).  The log density
// includes every normalising constant of the priors.
//
// Data layout: as in dawid_skene.stan (units with integer weights; the
// unit-by-(rater, rating) count matrix C in CSR form (w, v, u)).  Because the
// error matrix is shared, the counts are summed over raters once, in
// transformed data, into a dense I x (K + 1) matrix n (last column 1), and
// the log joint of every unit and class is the single product
// n * [log theta'; log pi'] (cost I * K * K per evaluation).
functions {
  // Per-unit log-likelihood from the I x K log joint; known units conditioned.
  vector marginal_log_lik(matrix lj, data array[] int known) {
    int I = rows(lj);
    vector[I] ll;
    for (i in 1:I) {
      ll[i] = known[i] == 0 ? log_sum_exp(lj[i]) : lj[i, known[i]];
    }
    return ll;
  }

  // (K + 1) x K matrix with entry [l, k] = log theta[k, l] and last row log pi.
  matrix log_theta_matrix(array[] vector theta, vector pi) {
    int K = size(theta);
    matrix[K + 1, K] out;
    for (k in 1:K) {
      out[1:K, k] = log(theta[k]);
    }
    out[K + 1] = log(pi)';
    return out;
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
  array[K] vector<lower=0>[K] beta;         // Dirichlet prior on row k of the shared error matrix
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
  matrix[I, K + 1] n = append_col(rep_matrix(0, I, K), rep_vector(1, I));  // ratings per category
  for (i in 1:I) {
    for (idx in u[i]:(u[i + 1] - 1)) {
      int l = (v[idx] - 1) % K + 1;
      n[i, l] += w[idx];
    }
  }
  // The Dirichlet priors as one dot product with to_vector(log_theta_matrix(theta, pi)).
  vector[(K + 1) * K] prior_m1;
  real prior_const = lgamma(sum(alpha)) - sum(lgamma(alpha));
  {
    matrix[K + 1, K] m1;
    for (k in 1:K) {
      m1[1:K, k] = beta[k] - 1;
      prior_const += lgamma(sum(beta[k])) - sum(lgamma(beta[k]));
    }
    m1[K + 1] = (alpha - 1)';
    prior_m1 = to_vector(m1);
  }
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  array[K] simplex[K] theta;                // theta[k, l] = P(rating l | class k), all raters
}
model {
  matrix[K + 1, K] lt = log_theta_matrix(theta, pi);
  target += prior_const + dot_product(prior_m1, to_vector(lt));
  target += dot_product(weight_v, marginal_log_lik(n * lt, known));
}
generated quantities {
  vector[write_log_lik ? I : 0] log_lik;    // log p(y_i) per unit
  if (write_log_lik) {
    log_lik = marginal_log_lik(n * log_theta_matrix(theta, pi), known);
  }
}
