// Item-difficulty rating model for binary ratings (Han, Adiguzel & Carpenter,
// "Crowdsourcing with Difficulty: A Bayesian Rating Model for Heterogeneous
// Items", arXiv:2405.19521, 2024), marginalised over the true class.
//
// Category 1 (code 0) is the negative class, category 2 (code 1) the positive
// one.  For item i of true class z_i and rater j, with guessing gamma_i,
// discrimination delta_i and difficulty beta_i:
//
//   P(y_ij = 1 | z_i = 1) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_sens[j] - beta_i))
//   P(y_ij = 0 | z_i = 0) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_spec[j] - beta_i))
//
// Parameterisation and priors follow the authors' Stan programs
// (github.com/bob-carpenter/crowdsource-computo, stan/full.stan and its
// nested variants): guessing acts on both classes (a rater is right by luck
// with probability gamma_i), and
//
//   pi ~ Dirichlet(alpha)                                (the paper: beta(2, 2))
//   logit_sens[j] ~ normal(sens_prior[1], sens_prior[2])   (the paper: normal(1, 2))
//   logit_spec[j] ~ normal(spec_prior[1], spec_prior[2])   (the paper: normal(2, 2))
//   beta_i ~ normal(0, difficulty_scale)                 (the paper: normal(0, 1))
//   delta_i ~ lognormal(0, discrimination_scale)         (the paper: lognormal(0, 0.25))
//   gamma_i ~ beta(guessing_prior[1], guessing_prior[2])
//
// Non-adversarial raters (non_adversarial = 1), as in the authors' programs:
// logit_sens[j] > -logit_spec[j], i.e. sensitivity + specificity > 1 on an
// item of difficulty 0 with discrimination 1 and no guessing.  The rater
// prior is then the normal prior truncated to that half-plane; its
// normalising constant, Phi((m_sens + m_spec) / sqrt(s_sens^2 + s_spec^2))
// per rater, is included, so the log density keeps every normalising
// constant, as in the other programs.  has_discrimination = 0 fixes
// delta_i = 1 (1PL), has_guessing = 0 fixes gamma_i = 0.
//
// Data layout: as in dawid_skene.stan, but every unit must be ONE item
// (weight 1): per-item parameters make pattern compression invalid, so
// grouped data is expanded to items in Python before it reaches this program.
// Each nonzero (unit i, column (j-1)*2 + l) of the count matrix C is one
// (item, rater, rating) cell with its count; the per-item log joint is one
// sparse product of the per-cell log probabilities with the (I x nnz) CSR
// matrix of the counts.
functions {
  // elementwise log(exp(a) + exp(b))
  vector log_add_exp(vector a, vector b) {
    vector[rows(a)] m = fmax(a, b);
    return m + log1p_exp(-abs(a - b));
  }

  // Per-item log p(y_i, z_i = k) for the negative (column 1) and positive (column 2) class.
  matrix item_log_joint(vector log_pi, vector logit_sens, vector logit_spec, vector difficulty,
                        vector discrimination, vector guessing, data array[] int ii,
                        data array[] int jj, data array[] int pos, data array[] int neg,
                        data vector w, data array[] int cols, data array[] int u, int I) {
    int nnz = rows(w);
    vector[nnz] eta_pos = logit_sens[jj] - difficulty[ii];
    vector[nnz] eta_neg = logit_spec[jj] - difficulty[ii];
    vector[nnz] lp_pos;
    vector[nnz] lp_neg;
    matrix[I, 2] out;
    if (rows(discrimination) > 0) {
      eta_pos = discrimination[ii] .* eta_pos;
      eta_neg = discrimination[ii] .* eta_neg;
    }
    if (rows(guessing) > 0) {
      // right: log(g + (1 - g) p) = log1m((1 - g)(1 - p)); wrong: log((1 - g)(1 - p))
      vector[nnz] log1m_g = log1m(guessing[ii]);
      lp_pos[pos] = log1m_exp(log1m_g[pos] + log1m_inv_logit(eta_pos[pos]));
      lp_pos[neg] = log1m_g[neg] + log1m_inv_logit(eta_pos[neg]);
      lp_neg[neg] = log1m_exp(log1m_g[neg] + log1m_inv_logit(eta_neg[neg]));
      lp_neg[pos] = log1m_g[pos] + log1m_inv_logit(eta_neg[pos]);
    } else {
      lp_pos[pos] = log_inv_logit(eta_pos[pos]);
      lp_pos[neg] = log1m_inv_logit(eta_pos[neg]);
      lp_neg[neg] = log_inv_logit(eta_neg[neg]);
      lp_neg[pos] = log1m_inv_logit(eta_neg[pos]);
    }
    out[ : , 1] = log_pi[1] + csr_matrix_times_vector(I, nnz, w, cols, u, lp_neg);
    out[ : , 2] = log_pi[2] + csr_matrix_times_vector(I, nnz, w, cols, u, lp_pos);
    return out;
  }

  // log p(y_i), or log p(y_i, z_i = known[i]) for a unit of known class
  vector item_log_lik(matrix lj, data array[] int known) {
    int I = rows(lj);
    vector[I] ll = log_add_exp(lj[ : , 1], lj[ : , 2]);
    for (i in 1:I) {
      if (known[i] > 0) {
        ll[i] = lj[i, known[i]];
      }
    }
    return ll;
  }
}
data {
  int<lower=2, upper=2> K;                  // number of categories: binary only
  int<lower=1> J;                           // number of raters
  int<lower=1> I;                           // number of items
  array[I] int<lower=1, upper=1> weight;    // one item per unit (grouped data is expanded)
  int<lower=1> nnz;                         // number of nonzero entries of the count matrix C
  vector<lower=0>[nnz] w;                   // CSR values: the counts C[i, c]
  array[nnz] int<lower=1, upper=J * K> v;   // CSR column indexes c = (j-1)*K + l (1-based)
  array[I + 1] int<lower=1, upper=nnz + 1> u;  // CSR row starts (1-based), u[I+1] = nnz + 1
  array[I] int<lower=0, upper=K> known;     // known true class of a unit (1..K), 0 = unknown
  vector<lower=0>[K] alpha;                 // Dirichlet prior on pi
  int<lower=0, upper=1> has_discrimination; // 1: per-item discrimination (2PL)
  int<lower=0, upper=1> has_guessing;       // 1: per-item guessing on the positive class (3PL)
  int<lower=0, upper=1> non_adversarial;    // 1: logit_sens[j] + logit_spec[j] > 0
  array[2] real sens_prior;                 // normal prior on logit_sens: location, scale
  array[2] real spec_prior;                 // normal prior on logit_spec: location, scale
  real<lower=0> difficulty_scale;           // normal(0, .) prior on the difficulties
  real<lower=0> discrimination_scale;       // lognormal(0, .) prior on the discriminations
  vector<lower=0>[2] guessing_prior;        // beta prior on the guessing parameters
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-item log_lik in generated quantities
}
transformed data {
  // item, rater and rating of every nonzero cell; the cells rated positive / negative
  array[nnz] int ii;
  array[nnz] int jj;
  array[nnz] int cols = linspaced_int_array(nnz, 1, nnz);
  int n_pos = 0;
  for (i in 1:I) {
    for (idx in u[i]:(u[i + 1] - 1)) {
      ii[idx] = i;
      jj[idx] = (v[idx] - 1) %/% K + 1;
      n_pos += (v[idx] - 1) % K == 1;
    }
  }
  array[n_pos] int pos;
  array[nnz - n_pos] int neg;
  {
    int a = 1;
    int b = 1;
    for (idx in 1:nnz) {
      if ((v[idx] - 1) % K == 1) {
        pos[a] = idx;
        a += 1;
      } else {
        neg[b] = idx;
        b += 1;
      }
    }
  }
  real dirichlet_const = lgamma(sum(alpha)) - sum(lgamma(alpha));
  // log P(logit_sens + logit_spec > 0) under the untruncated rater prior
  real log_non_adversarial = normal_lcdf(sens_prior[1] + spec_prior[1] | 0,
                                         sqrt(square(sens_prior[2]) + square(spec_prior[2])));
  int n_disc = has_discrimination ? I : 0;
  int n_guess = has_guessing ? I : 0;
}
parameters {
  simplex[K] pi;                                      // prevalence: pi[2] is the positive class
  vector[J] logit_spec;
  vector<lower=(non_adversarial ? -logit_spec : rep_vector(negative_infinity(), J))>[J] logit_sens;
  vector[I] difficulty;
  vector<lower=0>[n_disc] discrimination;
  vector<lower=0, upper=1>[n_guess] guessing;
}
model {
  target += dirichlet_const + dot_product(alpha - 1, log(pi));
  target += normal_lpdf(logit_sens | sens_prior[1], sens_prior[2]);
  target += normal_lpdf(logit_spec | spec_prior[1], spec_prior[2]);
  if (non_adversarial) {
    target += -J * log_non_adversarial;  // the truncated prior's normalising constant
  }
  target += normal_lpdf(difficulty | 0, difficulty_scale);
  target += lognormal_lpdf(discrimination | 0, discrimination_scale);
  target += beta_lpdf(guessing | guessing_prior[1], guessing_prior[2]);
  target += sum(item_log_lik(item_log_joint(log(pi), logit_sens, logit_spec, difficulty, discrimination,
                                            guessing, ii, jj, pos, neg, w, cols, u, I), known));
}
generated quantities {
  // sensitivity / specificity of each rater on an item of difficulty 0, discrimination 1, no guessing
  array[J, K] simplex[K] theta;
  vector[write_log_lik ? I : 0] log_lik;                // log p(y_i) per item
  for (j in 1:J) {
    theta[j, 1] = [inv_logit(logit_spec[j]), 1 - inv_logit(logit_spec[j])]';
    theta[j, 2] = [1 - inv_logit(logit_sens[j]), inv_logit(logit_sens[j])]';
  }
  if (write_log_lik) {
    log_lik = item_log_lik(item_log_joint(log(pi), logit_sens, logit_spec, difficulty, discrimination,
                                          guessing, ii, jj, pos, neg, w, cols, u, I), known);
  }
}
