/*
 * rbg_events.c -- generic C for events (see rbg.h, section "Events"): forward dynamics
 * with unilateral constraints (rbg_prox_lcp) and the impact map (rbg_impulse), the robot
 * and the constraint set passed as data.  Counterparts of rbdgen's
 * gen/algorithms/prox_lcp.py and impulse.py: same iterates, same outputs.
 *
 * References: R. Tedrake, Underactuated Robotics notes (2012), §3.1 (unilateral
 * constraints as a linear complementarity problem) and §3.2 (the impact map);
 * J. Carpentier, R. Budhiraja, N. Mansard, Proximal and Sparse Resolution of Constrained
 * Dynamic Equations, RSS 2021 (eq. 18, Alg. 1);  A. Sathya, J. Carpentier, Constrained
 * Articulated Body Dynamics Algorithms, 2024 (eq. 27b, 29, Alg. 1-3).
 *
 * Notation as in rbg_constrained.c: rho = mu / weight per row, K (size x 6) the rows of
 * a constraint on the LOCAL spatial motion of its moving body.  proxLCP indexes K_mu's
 * constraint rows by their position i in c->lcp_order (the nu unilateral rows U first,
 * then the bilateral rows B), joints d at m + d.
 */
#include "rbg_internal.h"

/* ===================================================================== */
/*  proxLCP (Tedrake 2012 §3.1; Carpentier 2021 eq. 18, Alg. 1)          */
/* ===================================================================== */

/* A_U = -(L_U^T D_U L_U) (u x u, row-major) from the leading u x u block of the factor H
 * (rows of N doubles, its diagonal the pivots D), which factorises the Schur complement
 * -A_U left on U after eliminating every later index; Adinv_a = 1 / (A_U)_aa.  Row k of
 * L_U contributes -D_k L_ka L_kc to A_ac, rows in ascending order. */
static void schur_block(int u, int N, const int *RST ptr, const int *RST idx, const double *RST H,
                        double *RST A, double *RST Adinv)
{
    memset(A, 0, (size_t)u * u * sizeof(double));
    for (int k = 0; k < u; ++k) {
        const double *Hk = H + (size_t)N * k, Dk = Hk[k];
        A[(size_t)u * k + k] -= Dk;                              /* a = c = k: L_kk = 1 */
        for (int e = ptr[k]; e < ptr[k + 1]; ++e) {
            const int a = idx[e];
            const double t = Hk[a] * Dk;
            A[(size_t)u * a + k] -= t;                           /* c = k */
            A[(size_t)u * a + a] -= t * Hk[a];
            for (int f = e + 1; f < ptr[k + 1]; ++f)             /* c = idx[f] < a */
                A[(size_t)u * idx[f] + a] -= t * Hk[idx[f]];
        }
    }
    for (int a = 0; a < u; ++a) {                                /* mirror the upper triangle */
        for (int cc = 0; cc < a; ++cc)
            A[(size_t)u * a + cc] = A[(size_t)u * cc + a];
        Adinv[a] = 1.0 / A[(size_t)u * a + a];
    }
}

/* sum_c A_ac (lam_c - lam^_c) */
static inline double schur_product(const double *RST Aa, const double *RST lu, const double *RST hat, int u)
{
    double out = 0.0;
    for (int cc = 0; cc < u; ++cc)
        out += Aa[cc] * (lu[cc] - hat[cc]);
    return out;
}

/* work: H[N N] dinv[N] y[N] base[N] M[nv nv] b[nv] J[m nv] crba[22 nb + 6 nv] kin[30 nb]
 *       astar[m] rho[m] lprev[m] r[m] A[m m] Adinv[m] hat[m] lu[m] what[m]   (N = m + nv) */
int rbg_prox_lcp(const rbg_model *RST m, const rbg_constraints *RST c,
                 const rbg_prox_options *RST opt, const double *RST q, const double *RST v,
                 const double *RST tau, double *RST ddq, double *RST lam,
                 double *RST iterations, double *RST residual, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m, N = mr + nv, u = c->nu;
    const int *RST order = c->lcp_order, *RST ptr = c->lcp_ptr, *RST idx = c->lcp_idx;
    double *H = work, *dinv = H + (size_t)N * N, *y = dinv + N, *base = y + N, *M = base + N;
    double *b = M + (size_t)nv * nv, *J = b + nv, *crba = J + (size_t)mr * nv;
    double *kin = crba + 22 * nb + 6 * nv, *astar = kin + 30 * nb, *rho = astar + mr;
    double *lprev = rho + mr, *r = lprev + mr, *A = r + mr;
    double *Adinv = A + (size_t)mr * mr, *hat = Adinv + mr, *lu = hat + mr, *what = lu + mr;
    if (!all_finite(q, m->nq) || !all_finite(v, nv) || !all_finite(tau, nv) || bad_options(opt))
        return RBG_EINPUT;

    /* setup: M, b, J, a_c*;  K_mu = L^T D L with the rows U, B, joints (Alg. 1) */
    rbgi_kkt_terms(m, c, q, v, M, b, J, astar, crba, kin);
    damping(c, opt->mu, rho);
    rbgi_kkt_assemble(m, c, ptr, idx, order, rho, M, J, H);
    const int rc = rbgi_ldl_factor(N, ptr, idx, mr, H, dinv);
    if (rc)
        return rc;
    /* A_U and the lam-free part of every solve:  base = D^-1 L^-T [a_c*; tau - b] */
    schur_block(u, N, ptr, idx, H, A, Adinv);
    for (int i = 0; i < mr; ++i)
        base[i] = astar[order[i]];
    for (int d = 0; d < nv; ++d)
        base[mr + d] = tau[d] - b[d];
    rbgi_ldl_backward(N, N, ptr, idx, H, dinv, base);

    memset(lam, 0, (size_t)mr * sizeof(double));
    int k = 0;
    double res = 0.0;
    while (mr) {
        memcpy(lprev, lam, (size_t)mr * sizeof(double));
        /* step 2: the bilateral proximal step  K_mu [x; ddq] = [a_c* + rho lam_{k-1}; tau - b]
           on U:  lam^_U = -x_U = -(L^-1 (base + D^-1 L^-T [rho lam_{k-1}; 0]))_U */
        for (int i = 0; i < mr; ++i)
            y[i] = rho[order[i]] * lprev[order[i]];
        rbgi_ldl_backward(mr, N, ptr, idx, H, dinv, y);
        for (int a = 0; a < u; ++a)
            hat[a] = base[a] + y[a];
        rbgi_ldl_forward(0, u, N, ptr, idx, H, hat);
        for (int a = 0; a < u; ++a)
            hat[a] = -hat[a];
        /* one projected Gauss-Seidel sweep from lam_{k-1, U}:
             lam_a <- max(0, lam_a - (A_U (lam_U - lam^_U))_a / (A_U)_aa);
           then w^_U = A_U (lam_U - lam^_U) */
        for (int a = 0; a < u; ++a)
            lu[a] = lprev[order[a]];
        for (int a = 0; a < u; ++a)
            lu[a] = fmax(0.0, lu[a] - schur_product(A + (size_t)u * a, lu, hat, u) * Adinv[a]);
        for (int a = 0; a < u; ++a)
            what[a] = schur_product(A + (size_t)u * a, lu, hat, u);
        /* step 3:  K_mu [x; ddq_k] = [a_c* + rho lam_{k-1} + (w^_U; 0); tau - b]; the joint
           rows of D^-1 L^-T [.; 0] are zero, so those of y are base's */
        for (int i = 0; i < mr; ++i)
            y[i] = rho[order[i]] * lprev[order[i]] + (i < u ? what[i] : 0.0);
        rbgi_ldl_backward(mr, N, ptr, idx, H, dinv, y);
        for (int i = 0; i < mr; ++i)
            y[i] += base[i];
        memcpy(y + mr, base + mr, (size_t)nv * sizeof(double));
        rbgi_ldl_forward(0, mr, N, ptr, idx, H, y);
        /* lam_k and the natural residual:  r_U = min(lam_U, w_U),
           w_U = w^_U - rho (lam_k - lam_{k-1})_U;  r_B = rho (lam_{k-1} - lam_k)_B */
        for (int a = 0; a < u; ++a) {
            const int rr = order[a];
            const double w = what[a] - rho[rr] * (lu[a] - lprev[rr]);
            lam[rr] = lu[a];
            r[rr] = fmin(lu[a], w);
        }
        for (int i = u; i < mr; ++i) {
            const int rr = order[i];
            lam[rr] = -y[i];
            r[rr] = rho[rr] * (lprev[rr] - lam[rr]);
        }
        if (prox_stop(opt, r, mr, ++k, &res))
            break;
    }
    if (!mr)
        memcpy(y, base, (size_t)N * sizeof(double));
    /* ddq_k: the joint rows of the last solve */
    rbgi_ldl_forward(mr, N, N, ptr, idx, H, y);
    memcpy(ddq, y + mr, (size_t)nv * sizeof(double));
    *iterations = k;
    *residual = res;
    return RBG_OK;
}

/* ===================================================================== */
/*  Impact map (Tedrake 2012 §3.2; Sathya 2024 Alg. 1-3)                 */
/* ===================================================================== */

/* Per constraint: K_l (the world placements oX computed when a frame A is the world, which
 * K then reads through c1Mc2) and the target k = -(1 + e) K v-_b. */
static void impact_rows(const rbg_model *RST m, const rbg_constraints *RST c, const rbgi_caba *RST s,
                        double restitution)
{
    int world = 0;
    for (int l = 0; l < c->nc; ++l)
        world |= c->body1[l] < 0;
    double o[3] = {0.0, 0.0, 0.0};
    if (world)
        for (int i = 0; i < m->nbodies; ++i)
            world_placement(m, i, s->w.X + 12 * i, s->oX, o);
    for (int l = 0; l < c->nc; ++l) {
        const int r0 = c->row[l];
        const double *vb = s->w.vel + 6 * moving_body(c, l);
        double rel[12] = {0};
        if (c->body1[l] < 0) {
            double oc1[12], oc2[12];
            rbgi_frame_placement(c, l, 1, s->oX, o, oc1);
            rbgi_frame_placement(c, l, 2, s->oX, o, oc2);
            inv_compose(oc1, oc2, rel);
        }
        rbgi_constraint_K(c, l, rel, s->K + 6 * r0);
        for (int rr = r0; rr < c->row[l + 1]; ++rr) {
            const double *Kr = s->K + 6 * rr;
            s->k[rr] = -(1.0 + restitution) * (Kr[0] * vb[0] + Kr[1] * vb[1] + Kr[2] * vb[2] + Kr[3] * vb[3]
                                               + Kr[4] * vb[4] + Kr[5] * vb[5]);
        }
    }
}

/* work: rbgi_caba_layout (RBG_WORK_CONSTRAINED_ABA), then tau0[nv] (zero torque) */
int rbg_impulse(const rbg_model *RST m, const rbg_constraints *RST c, const rbg_prox_options *RST opt,
                double restitution, const double *RST q, const double *RST v_minus, double *RST v_plus,
                double *RST impulse, double *RST iterations, double *RST residual, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv;
    const rbgi_caba s = rbgi_caba_layout(m, c, work);
    double *tau0 = work + RBG_WORK_CONSTRAINED_ABA(nb, nv, c->m);
    if (!all_finite(q, m->nq) || !all_finite(v_minus, nv) || bad_options(opt)
        || !(restitution >= 0.0 && restitution <= 1.0))
        return RBG_EINPUT;
    if (!c->anchored)
        return RBG_ELOOP;
    if (c->nu)
        return RBG_EUNILATERAL;
    /* an impact: no gravity, no torque, no velocity-product terms (Tedrake 2012 eq. 3.2) */
    rbg_model m0 = *m;
    m0.gravity[0] = m0.gravity[1] = m0.gravity[2] = 0.0;
    damping(c, opt->mu, s.rho);

    /* Alg. 1, first forward sweep at v-: X_i, v_i;  c_i = 0, IA_i = I_i, pA_i = 0; the rows
       K, k = -(1 + e) K v-_b; then line 5 (eq. 29) */
    rbgi_forward_velocities(m, q, v_minus, s.w.X, s.w.vel, s.w.c);
    for (int i = 0; i < nb; ++i)
        rbi_matrix(m->inertia + RBG_INERTIA_STRIDE * i, s.w.IA + 36 * i);
    memset(s.w.c, 0, (size_t)6 * nb * sizeof(double));
    memset(s.w.pA, 0, (size_t)6 * nb * sizeof(double));
    impact_rows(m, c, &s, restitution);
    rbgi_caba_augment(c, &s);
    /* Alg. 1, backward sweep with tau = 0 */
    memset(tau0, 0, (size_t)nv * sizeof(double));
    const int rc = rbgi_aba_backward(&m0, tau0, &s.w);
    if (rc)
        return rc;
    /* constrainedABA's iterations on the model without gravity: dv = v+ - v- */
    rbgi_caba_iterate(&m0, c, opt, &s, v_plus, impulse, iterations, residual);
    for (int d = 0; d < nv; ++d)
        v_plus[d] += v_minus[d];
    return RBG_OK;
}
