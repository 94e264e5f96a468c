// Ordinal raters (ordered logit with a shift and a scale per rater), marginalised over the true class.
//
//   pi ~ Dirichlet(alpha)
//   shift[j] ~ Normal(0, shift_sd),  log_scale[j] ~ Normal(log_scale_mean, log_scale_sd)
//   P(y <= l | z = k, rater j) = inv_logit((c[l+1] - k - shift[j]) / scale[j]),  c[m] = m - 1/2
//   theta[j, k, l] = P(y <= l | k, j) - P(y <= l - 1 | k, j)
//   z_i ~ Categorical(pi),  y_ijr | z_i = k ~ Categorical(theta[j, k])
//
// With has_lapse = 1 raters lapse: with probability lapse[j] rater j rates at random,
//   theta[j, k, l] = (1 - lapse[j]) * ordinal[j, k, l] + lapse[j] / K,  lapse[j] ~ Beta(lapse_prior)
// (has_lapse = 0: no lapse parameters, the plain ordinal model).
//
// Categories 0..K-1 (K >= 3) sit at their codes on the latent scale, cut at the
// midpoints: the class locations and cutpoints are fixed (they set the origin
// and unit of the scale), each rater has a shift (bias) and a scale (noise).
// The scale is a parameter on the log scale, so the posterior mode Stan's
// optimiser finds is the one of the density in (shift, log_scale), as EM's.
// The log density includes every normalising constant of the priors.
//
// Data layout: as in dawid_skene.stan (units with integer weights; the
// unit-by-(rater, rating) count matrix C in CSR form (w, v, u); one sparse
// product gives every unit's log joint for every class).
functions {
  // log(inv_logit(a) - inv_logit(b)) for a > b, stable in both tails
  real log_diff_inv_logit(real a, real b) {
    return log_inv_logit(a) - log1p_exp(b) + log1m_exp(b - a);
  }

  // (J*K) x K matrix with entry [(j-1)*K + l, k] = log theta[j, k, l]; lapse empty or of size J.
  matrix log_theta_matrix(vector shift, vector log_scale, vector lapse, int K) {
    int J = rows(shift);
    int has_lapse = rows(lapse) > 0;
    matrix[J * K, K] out;
    for (j in 1:J) {
      real inv_s = exp(-log_scale[j]);
      for (k in 1:K) {
        // standardised cutpoints z[m] = (m - 1/2 - (k - 1) - shift[j]) / scale[j], m = 1..K-1
        vector[K - 1] z = (linspaced_vector(K - 1, 0.5, K - 1.5) - (k - 1) - shift[j]) * inv_s;
        out[(j - 1) * K + 1, k] = log_inv_logit(z[1]);
        for (l in 2:(K - 1)) {
          out[(j - 1) * K + l, k] = log_diff_inv_logit(z[l], z[l - 1]);
        }
        out[j * K, k] = log1m_inv_logit(z[K - 1]);
        if (has_lapse) {
          // log((1 - g) theta + g / K), elementwise over the K ratings of class k
          for (l in 1:K) {
            out[(j - 1) * K + l, k] = log_sum_exp(log1m(lapse[j]) + out[(j - 1) * K + l, k],
                                                  log(lapse[j]) - log(K));
          }
        }
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
  int<lower=3> K;                           // number of ordered categories
  int<lower=1> J;                           // number of raters
  int<lower=1> I;                           // number of units (items, or rating patterns)
  array[I] int<lower=0> weight;             // items per unit: 1 for items, the tally for patterns
  int<lower=1> nnz;                         // number of nonzero entries of the count matrix C
  vector<lower=0>[nnz] w;                   // CSR values: the counts C[i, c]
  array[nnz] int<lower=1, upper=J * K> v;   // CSR column indexes c = (j-1)*K + l (1-based)
  array[I + 1] int<lower=1, upper=nnz + 1> u;  // CSR row starts (1-based), u[I+1] = nnz + 1
  array[I] int<lower=0, upper=K> known;     // known true class of a unit (1..K), 0 = unknown
  vector<lower=0>[K] alpha;                 // Dirichlet prior on pi
  real<lower=0> shift_sd;                   // Normal prior on shift[j]: sd (mean 0)
  real log_scale_mean;                      // Normal prior on log_scale[j]: mean
  real<lower=0> log_scale_sd;               // Normal prior on log_scale[j]: sd
  int<lower=0, upper=1> has_lapse;          // 1: raters lapse (rate at random) with probability lapse[j]
  vector<lower=0>[2] lapse_prior;           // Beta prior on lapse[j] (read when has_lapse)
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  vector[I] weight_v = to_vector(weight);
  // Block-diagonal CSR form of kron(I_K, [C, 1]) (see dawid_skene.stan): ONE sparse
  // product with to_vector(lt), lt = [log theta matrix; log pi'], gives the log
  // joint of every unit and class.
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
}
parameters {
  simplex[K] pi;                            // prevalence of the true classes
  vector[J] shift;                          // shift[j]: rater j's bias (> 0 rates high), in class widths
  vector[J] log_scale;                      // log of rater j's scale (noise)
  vector<lower=0, upper=1>[has_lapse ? J : 0] lapse;  // lapse[j]: rater j's probability of rating at random
}
model {
  vector[K] log_pi = log(pi);
  vector[JK1 * K] lt = to_vector(append_row(log_theta_matrix(shift, log_scale, lapse, K), log_pi'));
  target += prior_const + dot_product(alpha - 1, log_pi);
  target += normal_lpdf(shift | 0, shift_sd);  // full densities: right whether or not Stan drops constants
  target += normal_lpdf(log_scale | log_scale_mean, log_scale_sd);
  target += beta_lpdf(lapse | lapse_prior[1], lapse_prior[2]);  // 0 terms without lapses
  target += dot_product(weight_v, unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt),
                                               I, known));
}
generated quantities {
  // the implied error matrices (rows sum to 1 by construction; declared without the simplex check so
  // that a diverging optimiser step writes NaN rather than stopping the run)
  array[J, K] vector[K] theta;
  vector[write_log_lik ? I : 0] log_lik;    // log p(y_i) per unit
  {
    matrix[J * K, K] ltm = log_theta_matrix(shift, log_scale, lapse, K);
    for (j in 1:J) {
      for (k in 1:K) {
        theta[j, k] = exp(ltm[((j - 1) * K + 1):(j * K), k]);
        theta[j, k] /= sum(theta[j, k]);
      }
    }
    if (write_log_lik) {
      vector[JK1 * K] lt = to_vector(append_row(ltm, log(pi)'));
      log_lik = unit_log_lik(csr_matrix_times_vector(K * I, K * JK1, wb, vb, ub, lt), I, known);
    }
  }
}
