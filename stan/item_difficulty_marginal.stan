// Item-difficulty rating model (Han, Adiguzel & Carpenter, arXiv:2405.19521,
// 2024), marginalised over the true class AND over the per-item parameters
// (the "marginal" route of stan/item_difficulty.stan); binary ratings (K = 2)
// and K >= 3 categories.
//
// The model is that of item_difficulty.stan: for item i of true class z_i and
// rater j, with guessing gamma_i, discrimination delta_i and difficulty beta_i,
//
//   K = 2:  P(y_ij = 1 | z_i = 1) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_sens[j] - beta_i))
//           P(y_ij = 0 | z_i = 0) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_spec[j] - beta_i))
//   K >= 3: r_ijk = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_accuracy[j, k] - beta_i)),
//           P(y_ij = k | z_i = k) = r_ijk,  P(y_ij = l | z_i = k) = (1 - r_ijk) / (K - 1) for l != k
//
// with beta_i ~ normal(0, difficulty_scale), delta_i ~ lognormal(0,
// discrimination_scale), gamma_i ~ beta(guessing_prior).  These priors have
// fixed scales, so the item parameters integrate out of each item's
// likelihood on its own:
//
//   p(y_i | z_i = k) = E_{beta, delta, gamma ~ prior}[ prod_j p(y_ij | z_i = k, beta, delta, gamma) ]
//                    ~ sum_q w_q prod_j p(y_ij | z_i = k, beta_q, delta_q, gamma_q)
//
// by the tensor-product quadrature rule the data carry (Q nodes on the
// parameter scale with log weights summing to 0; pyrater builds it with
// pyrater.models.item_marginal.quadrature_rule: the trapezoidal rule in the
// standardised difficulty, Gauss-Hermite in the log discrimination,
// Gauss-Jacobi in the guessing).
// Items with the same ratings then share one likelihood, so units may be
// rating patterns: the data layout is that of dawid_skene.stan (a unit is an
// item, weight 1, or a distinct rating pattern, weight = its tally), and the
// log likelihood is sum_i weight[i] * log p(y_i).  Everything is computed in
// log space: the log probability of every (node, rater, rating) cell (eta
// once per (difficulty, discrimination) pair: consecutive nodes that differ
// only in the guessing share it), the per-unit sums plus the log weights as
// one product with the dense (units x (rater, rating)) count matrix per
// class, then log_sum_exp over the nodes and the classes.
//
// Priors on the remaining parameters, and the non-adversarial constraint, are
// those of item_difficulty.stan (every normalising constant kept): K = 2
// reads sens_prior / spec_prior (logit_sens + logit_spec > 0 per rater);
// K >= 3 reads accuracy_prior (logit_accuracy[j, k] > -log(K - 1)), and
// pyrater passes the binary defaults of sens_prior / spec_prior there.  The
// switches has_discrimination / has_guessing must agree with the rule: a
// fixed parameter has one value at every node (delta = 1, gamma = 0).
functions {
  // log p(y_u | z_u = class of `ability`) for every unit: the nodes integrated out.
  //   Cw: (I x (K J + 1)) dense counts; col (j-1) K + l = rating code l - 1 of rater j; last col 1
  //   right: rating code (0 .. K-1) that is right for this class; ability: the raters' logit ability on it
  //   pair: the (difficulty, discrimination) pair of each node, whose eta the nodes of the guessing share
  // The last row of the (K J + 1) x Q matrix of cell log probabilities holds the nodes' log weights, so
  // one matrix product gives log(w_q) + log p(y_u | class, node q) for every unit and node.  A wrong
  // rating is one of the K - 1 other categories, uniformly (K >= 3).
  vector unit_class_log_lik(vector ability, int right, int K, data matrix Cw, data vector pair_difficulty,
                            data vector pair_discrimination, data array[] int pair, data vector log1m_guessing,
                            data row_vector node_log_weight) {
    int Q = rows(log1m_guessing);
    int J = rows(ability);
    int I = rows(Cw);
    matrix[K * J + 1, Q] lp;  // log P(rating | class, node, rater); last row: log weights
    for (j in 1:J) {
      vector[rows(pair_difficulty)] miss = log1m_inv_logit(pair_discrimination .* (ability[j] - pair_difficulty));
      row_vector[Q] wrong = (log1m_guessing + miss[pair])';
      if (K == 2) {
        lp[2 * j - 1 + right] = log1m_exp(wrong);
        lp[2 * j - right] = wrong;
      } else {
        lp[((j - 1) * K + 1):(j * K)] = rep_matrix(wrong - log(K - 1.0), K);
        lp[(j - 1) * K + 1 + right] = log1m_exp(wrong);
      }
    }
    lp[K * J + 1] = node_log_weight;
    matrix[I, Q] unit_node = Cw * lp;
    vector[I] out;
    for (i in 1:I) {
      out[i] = log_sum_exp(unit_node[i]);
    }
    return out;
  }

  // elementwise log(exp(a) + exp(b))
  vector log_add_exp(vector a, vector b) {
    vector[rows(a)] m = fmax(a, b);
    return m + log1p_exp(-abs(a - b));
  }

  // log p(y_i), or log p(y_i, z_i = known[i]) for a unit of known class
  vector unit_log_lik(vector log_pi, vector ll_neg, vector ll_pos, data array[] int known) {
    int I = rows(ll_neg);
    vector[I] a = log_pi[1] + ll_neg;
    vector[I] b = log_pi[2] + ll_pos;
    vector[I] ll = log_add_exp(a, b);
    for (i in 1:I) {
      if (known[i] == 1) {
        ll[i] = a[i];
      } else if (known[i] == 2) {
        ll[i] = b[i];
      }
    }
    return ll;
  }

  // K >= 3: log p(y_i), or log p(y_i, z_i = known[i]) for a unit of known class; lj[i, k] = log p(y_i, z_i = k)
  vector unit_log_lik_k(matrix lj, data array[] int known) {
    int I = rows(lj);
    vector[I] ll;
    for (i in 1:I) {
      if (known[i] > 0) {
        ll[i] = lj[i, known[i]];
      } else {
        ll[i] = log_sum_exp(lj[i]);
      }
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
  int<lower=0, upper=1> has_discrimination; // 1: per-item discrimination (2PL)
  int<lower=0, upper=1> has_guessing;       // 1: per-item guessing (3PL)
  int<lower=0, upper=1> non_adversarial;    // 1: K = 2: logit_sens[j] + logit_spec[j] > 0;
                                            //    K >= 3: logit_accuracy[j, k] > -log(K - 1)
  array[2] real sens_prior;                 // K = 2: normal prior on logit_sens: location, scale
  array[2] real spec_prior;                 // K = 2: normal prior on logit_spec: location, scale
  matrix[K > 2 ? K : 0, 2] accuracy_prior;  // K >= 3: row k: normal prior on logit_accuracy[, k] (location, scale)
  real<lower=0> difficulty_scale;           // normal(0, .) prior on the difficulties (the rule's)
  real<lower=0> discrimination_scale;       // lognormal(0, .) prior on the discriminations (the rule's)
  vector<lower=0>[2] guessing_prior;        // beta prior on the guessing parameters (the rule's)
  int<lower=1> Q;                           // quadrature nodes
  vector[Q] node_difficulty;                // beta at each node
  vector<lower=0>[Q] node_discrimination;   // delta at each node (1 without discrimination)
  vector<lower=0, upper=1>[Q] node_guessing; // gamma at each node (0 without guessing)
  vector[Q] node_log_weight;                // log weights, log_sum_exp = 0
  int<lower=0, upper=1> write_log_lik;      // 1: write the per-unit log_lik in generated quantities
}
transformed data {
  // dense counts with a column of ones (it picks up the nodes' log weights in the product)
  matrix[I, J * K + 1] Cw = append_col(csr_to_dense_matrix(I, J * K, w, v, u), rep_vector(1, I));
  vector[I] weight_v = to_vector(weight);
  vector[Q] log1m_guessing = log1m(node_guessing);
  row_vector[Q] lw = node_log_weight';
  // the distinct (difficulty, discrimination) pairs of the nodes: eta = delta (ability - beta) per pair
  array[Q] int pair;
  int n_pair = 0;
  for (q in 1:Q) {
    if (q == 1 || node_difficulty[q] != node_difficulty[q - 1]
        || node_discrimination[q] != node_discrimination[q - 1]) {
      n_pair += 1;
    }
    pair[q] = n_pair;
  }
  vector[n_pair] pair_difficulty;
  vector[n_pair] pair_discrimination;
  for (q in 1:Q) {
    pair_difficulty[pair[q]] = node_difficulty[q];
    pair_discrimination[pair[q]] = node_discrimination[q];
  }
  if (abs(log_sum_exp(node_log_weight)) > 1e-8) {
    reject("the quadrature weights must sum to 1 (log_sum_exp(node_log_weight) = 0)");
  }
  if (!has_discrimination && max(abs(node_discrimination - 1)) > 0) {
    reject("has_discrimination = 0 needs node_discrimination = 1 at every node");
  }
  if (!has_guessing && max(node_guessing) > 0) {
    reject("has_guessing = 0 needs node_guessing = 0 at every node");
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
}
parameters {
  simplex[K] pi;                                      // prevalence (K = 2: pi[2] is the positive class)
  vector[n_bin] logit_spec;                           // K = 2 only
  vector<lower=(non_adversarial ? -logit_spec : rep_vector(negative_infinity(), n_bin))>[n_bin] logit_sens;
  // K >= 3 only: rater j's logit accuracy on true class k
  matrix<lower=(non_adversarial ? -log(K - 1.0) : negative_infinity())>[K > 2 ? J : 0, K] logit_accuracy;
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
  if (K == 2) {
    vector[I] ll_neg = unit_class_log_lik(logit_spec, 0, K, Cw, pair_difficulty, pair_discrimination, pair, log1m_guessing, lw);
    vector[I] ll_pos = unit_class_log_lik(logit_sens, 1, K, Cw, pair_difficulty, pair_discrimination, pair, log1m_guessing, lw);
    target += dot_product(weight_v, unit_log_lik(log(pi), ll_neg, ll_pos, known));
  } else {
    matrix[I, K] lj;
    for (k in 1:K) {
      lj[ : , k] = log(pi[k]) + unit_class_log_lik(logit_accuracy[ : , k], k - 1, K, Cw, pair_difficulty,
                                                   pair_discrimination, pair, log1m_guessing, lw);
    }
    target += dot_product(weight_v, unit_log_lik_k(lj, known));
  }
}
generated quantities {
  // each rater's error matrix on an item of difficulty 0, discrimination 1, no guessing
  // (K = 2: specificity and sensitivity; K >= 3: accuracy on the diagonal, errors uniform)
  array[J, K] simplex[K] theta;
  vector[write_log_lik ? I : 0] log_lik;                // log p(y_i) per unit
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
      vector[I] ll_neg = unit_class_log_lik(logit_spec, 0, K, Cw, pair_difficulty, pair_discrimination, pair, log1m_guessing, lw);
      vector[I] ll_pos = unit_class_log_lik(logit_sens, 1, K, Cw, pair_difficulty, pair_discrimination, pair, log1m_guessing, lw);
      log_lik = unit_log_lik(log(pi), ll_neg, ll_pos, known);
    } else {
      matrix[I, K] lj;
      for (k in 1:K) {
        lj[ : , k] = log(pi[k]) + unit_class_log_lik(logit_accuracy[ : , k], k - 1, K, Cw, pair_difficulty,
                                                     pair_discrimination, pair, log1m_guessing, lw);
      }
      log_lik = unit_log_lik_k(lj, known);
    }
  }
}
