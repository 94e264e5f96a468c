// MACE (Hovy et al. 2013), marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   competence[j] ~ Beta(beta1, beta2),  xi[j] ~ Dirichlet(gamma)
//   theta[j, k, l] = competence[j] * (k == l) + (1 - competence[j]) * xi[j, l]
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// On each rating rater j knows the answer with probability competence[j] and
// copies the true class; otherwise it spams, answering from xi[j] whatever the
// class.  The log density includes every normalising constant of the priors.
//
// Data layout: as in dawid_skene.stan (units with integer weights; the
// unit-by-(rater, rating) count matrix C in CSR form (w, v, u); one sparse
// product gives every unit's log joint for every class).
functions {
  // (J*K) x K matrix with entry [(j-1)*K + l, k] = log theta[j, k, l]:
  // log((1 - c_j) xi[j, l]) off the diagonal, log(c_j + (1 - c_j) xi[j, l]) on it.
  matrix log_theta_matrix(vector competence, array[] vector xi) {
    int J = rows(competence);
    int K = rows(xi[1]);
    vector[J] log_c = log(competence);
    vector[J] log_s = log1m(competence);
    matrix[J * K, K] out;
    for (j in 1:J) {
      vector[K] spam = log_s[j] + log(xi[j]);   // log((1 - c_j) xi[j, l]), l = 1..K
      out[((j - 1) * K + 1):(j * K)] = rep_matrix(spam, K);
      for (k in 1:K) {
        out[(j - 1) * K + k, k] = log_sum_exp(log_c[j], spam[k]);
      }
    }
    return out;
  }

  // Per-unit log-likelihood from r = C_b * to_vector(lt): r[(k-1)*I + i] is the
  // log joint log p(y_i, z_i = k).  log p(y_i) = log_sum_exp_k, or the known
  // class's log joint log p(y_i, z_i = known[i]) when the class is known.
  vector unit_log_lik(vector r, int I, data array[] int known) {
    int K = rows(r) %/% I;
    matrix[I, K] lj = to_matrix(r, I, K);
    vector[I] ll;
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
  real<lower=0> beta1;                      // Beta prior on competence[j]: first shape
  real<lower=0> beta2;                      // Beta prior on competence[j]: second shape
  vector<lower=0>[K] gamma;                 // Dirichlet prior on each spamming distribution xi[j]
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
  // Block-diagonal CSR form of kron(I_K, [C, 1]): row (k-1)*I + i holds row i of
  // the count matrix C in column block k, plus a 1 in the block's last column,
  // so ONE sparse product with to_vector(lt), lt = [log theta matrix; log pi']
  // ((J*K + 1) x K), gives the log joint of every unit and class.
  int JK1 = J * K + 1;
  int nnz_b = K * (nnz + I);
  vector[nnz_b] wb;
  array[nnz_b] int vb;
  array[K * I + 1] int ub;
  {
    int pos = 1;
    for (k in 1:K) {
      for (i in 1:I) {
        ub[(k - 1) * I + i] = pos;
        for (idx in u[i]:(u[i + 1] - 1)) {
          wb[pos] = w[idx];
          vb[pos] = (k - 1) * JK1 + v[idx];
          pos += 1;
        }
        wb[pos] = 1;
        vb[pos] = k * JK1;
        pos += 1;
      }
    }
    ub[K * I + 1] = pos;
  }
  // normalising constant of the Dirichlet prior (its kernel is added in the model block)
  real prior_const = lgamma(sum(alpha)) - sum(lgamma(alpha));
  real xi_const = lgamma(sum(gamma)) - sum(lgamma(gamma));  // ... and of each xi[j]'s
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  vector<lower=0, upper=1>[J] competence;   // P(rater j knows the answer) on a rating
  array[J] simplex[K] xi;                   // rater j's answers when it spams
}
model {
  vector[K] log_pi = log(pi);
  vector[JK1 * K] lt = to_vector(append_row(log_theta_matrix(competence, xi), log_pi'));
  target += prior_const + dot_product(alpha - 1, log_pi);
  // full densities: right whether or not Stan drops constants
  target += beta_lpdf(competence | beta1, beta2);
  target += J * xi_const;
  for (j in 1:J) {
    target += dot_product(gamma - 1, log(xi[j]));
  }
  target += dot_product(weight_v, unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt),
                                               I, known));
}
generated quantities {
  array[J, K] simplex[K] theta;             // the implied error matrices
  vector[write_log_lik ? I : 0] log_lik;    // log p(y_i) per unit
  for (j in 1:J) {
    for (k in 1:K) {
      theta[j, k] = (1 - competence[j]) * xi[j];
      theta[j, k, k] += competence[j];
    }
  }
  if (write_log_lik) {
    vector[JK1 * K] lt = to_vector(append_row(log_theta_matrix(competence, xi), log(pi)'));
    log_lik = unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt), I, known);
  }
}
