// Community Dawid-Skene model (community-based Bayesian classifier combination, Venanzi et al. 2014),
// marginalised over the true class and over each rater's community.
//
//   pi ~ Dirichlet(alpha),  rho ~ Dirichlet(rho_alpha)              (prevalence; community sizes)
//   m[l, k] ~ Dirichlet(beta[k])                                    (community l's typical row k)
//   s[l, k] ~ Gamma(s_shape, s_rate)                                (how tightly its members follow it)
//   c_j ~ Categorical(rho),  theta[j, k] | c_j = l ~ Dirichlet(1 + s[l, k] * m[l, k])
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// theta is a parameter, so c_j enters only its prior and is summed out:
//   log p(theta[j]) = log_sum_exp_l (log rho[l] + sum_k dirichlet_lpdf(theta[j, k] | 1 + s[l, k] m[l, k])),
// for all raters at once from one (J x K*K) by (K*K x L) matrix product.  The communities are not
// identified (relabelling them leaves the density unchanged): the parameters are m_raw, s_raw, rho_raw,
// and generated quantities report m, s, rho and community_prob (the posterior probability of rater j's
// community given the draw) with the communities sorted by the mean diagonal of m, largest first.  The
// log density includes every normalising constant of the priors.
//
// Data layout: as in dawid_skene.stan (units with integer weights; the unit-by-(rater, rating) count
// matrix C in CSR form (w, v, u); one sparse product gives every unit's log joint for every class).
functions {
  // J x (K*K) matrix with entry [j, (k-1)*K + l] = log theta[j, k, l] (a rater's rows side by side).
  matrix log_theta_rows(array[,] vector theta) {
    int J = dims(theta)[1];
    int K = dims(theta)[2];
    matrix[J, K * K] out;
    for (j in 1:J) {
      for (k in 1:K) {
        out[j, ((k - 1) * K + 1):(k * K)] = log(theta[j, k])';
      }
    }
    return out;
  }

  // J x L matrix of log rho[l] + sum_k log Dirichlet(theta[j, k] | 1 + s[l, k] m[l, k]): rater j's
  // log joint with community l.  One matrix product: lth (J x K*K) times the (K*K x L) matrix of s m.
  matrix community_log_joint(matrix lth, vector rho, array[,] vector m, array[] vector s) {
    int J = rows(lth);
    int L = num_elements(rho);
    int K = num_elements(s[1]);
    matrix[K * K, L] A;
    row_vector[L] c0 = log(rho)';
    for (l in 1:L) {
      for (k in 1:K) {
        vector[K] a = 1 + s[l, k] * m[l, k];
        A[((k - 1) * K + 1):(k * K), l] = a - 1;
        c0[l] += lgamma(sum(a)) - sum(lgamma(a));
      }
    }
    return lth * A + rep_matrix(c0, J);
  }

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
  int<lower=1> L;                           // number of communities
  matrix<lower=0>[K, K] beta;               // Dirichlet prior on each community row m[l, k] (row k)
  real<lower=1> s_shape;                    // Gamma prior on s[l, k]: shape
  real<lower=0> s_rate;                     // Gamma prior on s[l, k]: rate
  real<lower=0> rho_alpha;                  // symmetric Dirichlet prior on rho
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
  // Block-diagonal CSR form of kron(I_K, [C, 1]), as in dawid_skene.stan.
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
  vector[L] rho_alpha_v = rep_vector(rho_alpha, L);
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  simplex[L] rho_raw;                       // community sizes (unsorted)
  array[L, K] simplex[K] m_raw;             // communities' typical rows (unsorted)
  array[L] vector<lower=0>[K] s_raw;        // concentrations (unsorted)
  array[J, K] simplex[K] theta;             // theta[j, k, l] = P(rating l | class k, rater j)
}
model {
  vector[K] log_pi = log(pi);
  matrix[J * K, K] ltheta = log_theta_matrix(theta);
  vector[JK1 * K] lt = to_vector(append_row(ltheta, log_pi'));
  matrix[J, L] lpc = community_log_joint(log_theta_rows(theta), rho_raw, m_raw, s_raw);
  target += dirichlet_lpdf(pi | alpha) + dirichlet_lpdf(rho_raw | rho_alpha_v);
  for (l in 1:L) {
    for (k in 1:K) {
      target += dirichlet_lpdf(m_raw[l, k] | beta[k]');
    }
    target += gamma_lpdf(s_raw[l] | s_shape, s_rate);
  }
  for (j in 1:J) {
    target += log_sum_exp(lpc[j]);
  }
  target += dot_product(weight_v, unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt),
                                               I, known));
}
generated quantities {
  // the communities sorted by the mean diagonal of m, largest first
  array[L, K] vector[K] m;
  array[L] vector[K] s;
  vector[L] rho;
  matrix[J, L] community_prob;              // P(rater j in community l | theta, m, s, rho)
  // log p(y_i) per unit (for a pattern of grouped data: per item of that pattern)
  vector[write_log_lik ? I : 0] log_lik;
  {
    vector[L] diag_mean;
    for (l in 1:L) {
      diag_mean[l] = 0;
      for (k in 1:K) {
        diag_mean[l] += m_raw[l, k, k] / K;
      }
    }
    array[L] int ord = sort_indices_desc(diag_mean);
    matrix[J, L] lpc = community_log_joint(log_theta_rows(theta), rho_raw, m_raw, s_raw);
    for (l in 1:L) {
      m[l] = m_raw[ord[l]];
      s[l] = s_raw[ord[l]];
      rho[l] = rho_raw[ord[l]];
    }
    for (j in 1:J) {
      vector[L] p = softmax(lpc[j]');
      community_prob[j] = p[ord]';
    }
  }
  if (write_log_lik) {
    vector[JK1 * K] lt = to_vector(append_row(log_theta_matrix(theta), log(pi)'));
    log_lik = unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt), I, known);
  }
}
