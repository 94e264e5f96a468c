// Pooled Dawid-Skene model (hierarchical Dirichlet), marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   m[k] ~ Dirichlet(beta[k])                  (population row k: the raters' modal row)
//   s[k] ~ Gamma(s_shape, s_rate)              (concentration of the raters around m[k])
//   theta[j, k] ~ Dirichlet(1 + s[k] * m[k])   (row k of rater j's error matrix)
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// The "1 +" makes m[k] the mode of the raters' rows and keeps every Dirichlet
// parameter above 1, so the posterior density is bounded and its mode
// (optimize) exists; s_shape > 1 and the Gamma's tail keep s[k] off 0 and
// infinity.  The error matrices are in the centred parameterisation.  The log
// density includes every normalising constant of the priors.
//
// Data layout: as in dawid_skene.stan (units with integer weights; the
// unit-by-(rater, rating) count matrix C in CSR form (w, v, u); one sparse
// product gives every unit's log joint for every class).
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
  matrix<lower=0>[K, K] beta;               // Dirichlet prior on the population row m[k] (row k)
  real<lower=1> s_shape;                    // Gamma prior on s[k]: shape
  real<lower=0> s_rate;                     // Gamma prior on s[k]: rate
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
  real prior_const = lgamma(sum(alpha)) - sum(lgamma(alpha));
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  array[K] simplex[K] m;                    // population rows
  vector<lower=0>[K] s;                     // concentrations of the raters around m
  array[J, K] simplex[K] theta;             // theta[j, k, l] = P(rating l | class k, rater j)
}
model {
  vector[K] log_pi = log(pi);
  matrix[J * K, K] ltheta = log_theta_matrix(theta);
  vector[JK1 * K] lt = to_vector(append_row(ltheta, log_pi'));
  target += prior_const + dot_product(alpha - 1, log_pi);
  for (k in 1:K) {
    vector[K] a = 1 + s[k] * m[k];
    target += dirichlet_lpdf(m[k] | beta[k]');
    // sum_j log Dirichlet(theta[j, k] | a), from the column of log theta[., k, .]
    target += J * (lgamma(sum(a)) - sum(lgamma(a)))
              + dot_product(to_vector(rep_matrix(a - 1, J)), ltheta[:, k]);
  }
  target += gamma_lpdf(s | s_shape, s_rate);
  target += dot_product(weight_v, unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt),
                                               I, known));
}
generated quantities {
  // log p(y_i) per unit (for a pattern of grouped data: per item of that pattern)
  vector[write_log_lik ? I : 0] log_lik;
  if (write_log_lik) {
    vector[JK1 * K] lt = to_vector(append_row(log_theta_matrix(theta), log(pi)'));
    log_lik = unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt), I, known);
  }
}
