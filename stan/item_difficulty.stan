// Item-difficulty rating model (Han, Adiguzel & Carpenter, "Crowdsourcing
// with Difficulty: A Bayesian Rating Model for Heterogeneous Items",
// arXiv:2405.19521, 2024), marginalised over the true class; binary ratings
// (K = 2) and, as in GLAD (Whitehill et al. 2009), K >= 3 categories.
//
// Binary (K = 2): category 1 (code 0) is the negative class, category 2
// (code 1) the positive one.  For item i of true class z_i and rater j, with
// guessing gamma_i, discrimination delta_i and difficulty beta_i:
//
//   P(y_ij = 1 | z_i = 1) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_sens[j] - beta_i))
//   P(y_ij = 0 | z_i = 0) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_spec[j] - beta_i))
//
// K >= 3: rater j's accuracy on true class k is logit_accuracy[j, k] (logit
// scale, on an item of difficulty 0, discrimination 1, no guessing); a rater
// is right with
//
//   r_ijk = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_accuracy[j, k] - beta_i))
//   P(y_ij = k | z_i = k) = r_ijk,   P(y_ij = l | z_i = k) = (1 - r_ijk) / (K - 1)  for l != k
//
// (errors uniform over the other categories).  At K = 2 this formula is the
// binary model with logit_accuracy[, 1] = logit_spec, logit_accuracy[, 2] =
// logit_sens; the binary branch keeps its own parameters.
//
// Parameterisation and priors follow the authors' Stan programs
// (github.com/bob-carpenter/crowdsource-computo, stan/full.stan and its
// nested variants): guessing acts on every class (a rater is right by luck
// with probability gamma_i), and
//
//   pi ~ Dirichlet(alpha)                                (the paper: beta(2, 2))
//   K = 2:  logit_sens[j] ~ normal(sens_prior[1], sens_prior[2])   (the paper: normal(1, 2))
//           logit_spec[j] ~ normal(spec_prior[1], spec_prior[2])   (the paper: normal(2, 2))
//   K >= 3: logit_accuracy[j, k] ~ normal(accuracy_prior[k, 1], accuracy_prior[k, 2])
//   beta_i ~ normal(0, difficulty_scale)                 (the paper: normal(0, 1))
//   delta_i ~ lognormal(0, discrimination_scale)         (the paper: lognormal(0, 0.25))
//   gamma_i ~ beta(guessing_prior[1], guessing_prior[2])
//
// sens_prior / spec_prior are read only when K = 2 (pyrater passes the
// binary defaults at K >= 3), accuracy_prior only when K >= 3 (it has 0 rows
// at K = 2).
//
// Non-adversarial raters (non_adversarial = 1).  K = 2, as in the authors'
// programs: logit_sens[j] > -logit_spec[j], i.e. sensitivity + specificity > 1
// on an item of difficulty 0 with discrimination 1 and no guessing; the rater
// prior is the normal prior truncated to that half-plane, with its
// normalising constant Phi((m_sens + m_spec) / sqrt(s_sens^2 + s_spec^2)) per
// rater.  K >= 3: logit_accuracy[j, k] > -log(K - 1) for every j, k (accuracy
// above chance, 1 / K, on every class); the prior is the normal truncated
// there, with its normalising constant 1 - Phi((-log(K - 1) - m_k) / s_k) per
// rater and class.  The log density thus keeps every normalising constant, as
// in the other programs.  non_adversarial = 0 leaves the rater parameters
// unconstrained.  has_discrimination = 0 fixes delta_i = 1 (1PL),
// has_guessing = 0 fixes gamma_i = 0.
//
// Data layout: as in dawid_skene.stan, but every unit must be ONE item
// (weight 1): per-item parameters make pattern compression invalid, so
// grouped data is expanded to items in Python before it reaches this program.
// Each nonzero (unit i, column (j-1)*K + l) of the count matrix C is one
// (item, rater, rating) cell with its count; the per-item log joint of each
// class is one sparse product of the per-cell log probabilities with the
// (I x nnz) CSR matrix of the counts.
functions {
  // elementwise log(exp(a) + exp(b))
  vector log_add_exp(vector a, vector b) {
    vector[rows(a)] m = fmax(a, b);
    return m + log1p_exp(-abs(a - b));
  }

  // K = 2: per-item log p(y_i, z_i = k) for the negative (column 1) and positive (column 2) class.
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

  // K >= 3: per-item log p(y_i, z_i = k) for every class k (column k).
  //   ability: (J x K) logit accuracies; by_class[k]: the cells rated k (the first n_right[k]), then the others
  matrix item_log_joint_k(vector log_pi, matrix ability, vector difficulty, vector discrimination,
                          vector guessing, data array[] int ii, data array[] int jj,
                          data array[,] int by_class, data array[] int n_right, data vector w,
                          data array[] int cols, data array[] int u, int I) {
    int nnz = rows(w);
    int K = rows(log_pi);
    real log_km1 = log(K - 1.0);  // a wrong rating is one of K - 1 categories, uniformly
    vector[rows(guessing) > 0 ? nnz : 0] log1m_g;
    matrix[I, K] out;
    if (rows(guessing) > 0) {
      log1m_g = log1m(guessing[ii]);
    }
    for (k in 1:K) {
      array[n_right[k]] int right = by_class[k, 1:n_right[k]];
      array[nnz - n_right[k]] int wrong = by_class[k, (n_right[k] + 1):nnz];
      vector[nnz] eta = ability[jj, k] - difficulty[ii];
      vector[nnz] lp;
      if (rows(discrimination) > 0) {
        eta = discrimination[ii] .* eta;
      }
      if (rows(guessing) > 0) {
        // right: log(g + (1 - g) p) = log1m((1 - g)(1 - p)); wrong: log((1 - g)(1 - p) / (K - 1))
        lp[right] = log1m_exp(log1m_g[right] + log1m_inv_logit(eta[right]));
        lp[wrong] = log1m_g[wrong] + log1m_inv_logit(eta[wrong]) - log_km1;
      } else {
        lp[right] = log_inv_logit(eta[right]);
        lp[wrong] = log1m_inv_logit(eta[wrong]) - log_km1;
      }
      out[ : , k] = log_pi[k] + csr_matrix_times_vector(I, nnz, w, cols, u, lp);
    }
    return out;
  }

  // log p(y_i), or log p(y_i, z_i = known[i]) for a unit of known class
  vector item_log_lik(matrix lj, data array[] int known) {
    int I = rows(lj);
    vector[I] ll;
    if (cols(lj) == 2) {
      ll = log_add_exp(lj[ : , 1], lj[ : , 2]);
    } else {
      for (i in 1:I) {
        ll[i] = log_sum_exp(lj[i]);
      }
    }
    for (i in 1:I) {
      if (known[i] > 0) {
        ll[i] = lj[i, known[i]];
      }
    }
    return ll;
  }
}
data {
  int<lower=2> K;                           // number of categories
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
  int<lower=0, upper=1> has_guessing;       // 1: per-item guessing (3PL)
  int<lower=0, upper=1> non_adversarial;    // 1: K = 2: logit_sens[j] + logit_spec[j] > 0;
                                            //    K >= 3: logit_accuracy[j, k] > -log(K - 1)
  array[2] real sens_prior;                 // K = 2: normal prior on logit_sens: location, scale
  array[2] real spec_prior;                 // K = 2: normal prior on logit_spec: location, scale
  matrix[K > 2 ? K : 0, 2] accuracy_prior;  // K >= 3: row k: normal prior on logit_accuracy[, k] (location, scale)
  real<lower=0> difficulty_scale;           // normal(0, .) prior on the difficulties
  real<lower=0> discrimination_scale;       // lognormal(0, .) prior on the discriminations
  vector<lower=0>[2] guessing_prior;        // beta prior on the guessing parameters
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-item log_lik in generated quantities
}
transformed data {
  // item, rater and rating code (1..K) of every nonzero cell
  array[nnz] int ii;
  array[nnz] int jj;
  array[nnz] int code;
  array[nnz] int cols = linspaced_int_array(nnz, 1, nnz);
  for (i in 1:I) {
    for (idx in u[i]:(u[i + 1] - 1)) {
      ii[idx] = i;
      jj[idx] = (v[idx] - 1) %/% K + 1;
      code[idx] = (v[idx] - 1) % K + 1;
    }
  }
  // K = 2: the cells rated positive / negative
  int n_pos = 0;
  for (idx in 1:nnz) {
    n_pos += K == 2 && code[idx] == 2;
  }
  array[n_pos] int pos;
  array[K == 2 ? nnz - n_pos : 0] int neg;
  if (K == 2) {
    int a = 1;
    int b = 1;
    for (idx in 1:nnz) {
      if (code[idx] == 2) {
        pos[a] = idx;
        a += 1;
      } else {
        neg[b] = idx;
        b += 1;
      }
    }
  }
  // K >= 3: for every class k the cells rated k (right), then the others (wrong)
  int n_class = K > 2 ? K : 0;
  array[n_class, nnz] int by_class;
  array[n_class] int n_right;
  for (k in 1:n_class) {
    int a = 0;
    for (idx in 1:nnz) {
      if (code[idx] == k) {
        a += 1;
        by_class[k, a] = idx;
      }
    }
    n_right[k] = a;
    for (idx in 1:nnz) {
      if (code[idx] != k) {
        a += 1;
        by_class[k, a] = idx;
      }
    }
  }
  if (K > 2 && min(accuracy_prior[ : , 2]) <= 0) {
    reject("accuracy_prior: the scales (second column) must be > 0");
  }
  real dirichlet_const = lgamma(sum(alpha)) - sum(lgamma(alpha));
  // log P(non-adversarial) for one rater under the untruncated rater prior: K = 2: P(logit_sens + logit_spec > 0);
  // K >= 3: prod_k P(logit_accuracy[j, k] > -log(K - 1))
  real log_non_adversarial;
  if (K == 2) {
    log_non_adversarial = normal_lcdf(sens_prior[1] + spec_prior[1] | 0,
                                      sqrt(square(sens_prior[2]) + square(spec_prior[2])));
  } else {
    log_non_adversarial = 0;
    for (k in 1:K) {
      log_non_adversarial += normal_lccdf(-log(K - 1.0) | accuracy_prior[k, 1], accuracy_prior[k, 2]);
    }
  }
  int n_bin = K == 2 ? J : 0;
  int n_disc = has_discrimination ? I : 0;
  int n_guess = has_guessing ? I : 0;
}
parameters {
  simplex[K] pi;                                      // prevalence (K = 2: pi[2] is the positive class)
  vector[n_bin] logit_spec;                           // K = 2 only
  vector<lower=(non_adversarial ? -logit_spec : rep_vector(negative_infinity(), n_bin))>[n_bin] logit_sens;
  // K >= 3 only: rater j's logit accuracy on true class k
  matrix<lower=(non_adversarial ? -log(K - 1.0) : negative_infinity())>[K > 2 ? J : 0, K] logit_accuracy;
  vector[I] difficulty;
  vector<lower=0>[n_disc] discrimination;
  vector<lower=0, upper=1>[n_guess] guessing;
}
model {
  target += dirichlet_const + dot_product(alpha - 1, log(pi));
  if (K == 2) {
    target += normal_lpdf(logit_sens | sens_prior[1], sens_prior[2]);
    target += normal_lpdf(logit_spec | spec_prior[1], spec_prior[2]);
  } else {
    for (k in 1:K) {
      target += normal_lpdf(logit_accuracy[ : , k] | accuracy_prior[k, 1], accuracy_prior[k, 2]);
    }
  }
  if (non_adversarial) {
    target += -J * log_non_adversarial;  // the truncated prior's normalising constant
  }
  target += normal_lpdf(difficulty | 0, difficulty_scale);
  target += lognormal_lpdf(discrimination | 0, discrimination_scale);
  target += beta_lpdf(guessing | guessing_prior[1], guessing_prior[2]);
  if (K == 2) {
    target += sum(item_log_lik(item_log_joint(log(pi), logit_sens, logit_spec, difficulty, discrimination,
                                              guessing, ii, jj, pos, neg, w, cols, u, I), known));
  } else {
    target += sum(item_log_lik(item_log_joint_k(log(pi), logit_accuracy, difficulty, discrimination, guessing,
                                                ii, jj, by_class, n_right, w, cols, u, I), known));
  }
}
generated quantities {
  // each rater's error matrix on an item of difficulty 0, discrimination 1, no guessing
  // (K = 2: specificity and sensitivity; K >= 3: accuracy on the diagonal, errors uniform)
  array[J, K] simplex[K] theta;
  vector[write_log_lik ? I : 0] log_lik;                // log p(y_i) per item
  if (K == 2) {
    for (j in 1:J) {
      theta[j, 1] = [inv_logit(logit_spec[j]), 1 - inv_logit(logit_spec[j])]';
      theta[j, 2] = [1 - inv_logit(logit_sens[j]), inv_logit(logit_sens[j])]';
    }
  } else {
    for (j in 1:J) {
      for (k in 1:K) {
        theta[j, k] = rep_vector(inv_logit(-logit_accuracy[j, k]) / (K - 1), K);
        theta[j, k, k] = inv_logit(logit_accuracy[j, k]);
      }
    }
  }
  if (write_log_lik) {
    if (K == 2) {
      log_lik = item_log_lik(item_log_joint(log(pi), logit_sens, logit_spec, difficulty, discrimination,
                                            guessing, ii, jj, pos, neg, w, cols, u, I), known);
    } else {
      log_lik = item_log_lik(item_log_joint_k(log(pi), logit_accuracy, difficulty, discrimination, guessing,
                                              ii, jj, by_class, n_right, w, cols, u, I), known);
    }
  }
}
