// Reference ("textbook") Dawid-Skene program used only by bench/bench_stan.py.
//
// The straightforward formulation of the Stan User's Guide (latent discrete
// parameters chapter, "Data coding and diagnostic accuracy models"), extended
// to long data in any design as in rater: loop over the N ratings accumulating
// log p(y_i, z_i = k) per item, then log_sum_exp per item.  Same model and
// priors as stan/dawid_skene.stan (which adds only normalising constants).
data {
  int<lower=2> K;                           // number of categories
  int<lower=1> I;                           // number of items
  int<lower=1> J;                           // number of raters
  int<lower=1> N;                           // number of ratings
  array[N] int<lower=1, upper=I> ii;        // item of rating n
  array[N] int<lower=1, upper=J> jj;        // rater of rating n
  array[N] int<lower=1, upper=K> y;         // rating n
  vector<lower=0>[K] alpha;                 // Dirichlet prior on pi
  array[J, K] vector<lower=0>[K] beta;      // Dirichlet prior on error-matrix rows
}
parameters {
  simplex[K] pi;
  array[J, K] simplex[K] theta;
}
model {
  array[I] vector[K] log_p_z;
  pi ~ dirichlet(alpha);
  for (j in 1:J) {
    for (k in 1:K) {
      theta[j, k] ~ dirichlet(beta[j, k]);
    }
  }
  for (i in 1:I) {
    log_p_z[i] = log(pi);
  }
  for (n in 1:N) {
    for (k in 1:K) {
      log_p_z[ii[n], k] = log_p_z[ii[n], k] + log(theta[jj[n], k, y[n]]);
    }
  }
  for (i in 1:I) {
    target += log_sum_exp(log_p_z[i]);
  }
}
