/*
 * rbg.c -- generic rigid-body dynamics in C99, the robot passed as data (see rbg.h).
 *
 * Notation follows Featherstone, Rigid Body Dynamics Algorithms (RBDA, 2008) in LOCAL
 * body frames with Pinocchio's conventions; the spatial arithmetic, joint transforms and
 * inertia helpers are in rbg_internal.h, shared with rbg_constrained.c.
 */
#include "rbg_internal.h"

/* ===================================================================== */
/*  Rigid-body inertia (10 parameters about the body origin)             */
/* ===================================================================== */

void rbg_inertia_params(double mass, const double *com, const double *I_c, double *out)
{
    /* h = m c;  I_O = I_c + m (|c|^2 1 - c c^T)  (parallel axis, RBDA eq. 2.63) */
    const double c2 = dot3(com, com);
    out[0] = mass;
    out[1] = mass * com[0];
    out[2] = mass * com[1];
    out[3] = mass * com[2];
    out[4] = I_c[0] + mass * (c2 - com[0] * com[0]);
    out[5] = 0.5 * (I_c[1] + I_c[3]) - mass * com[0] * com[1];
    out[6] = 0.5 * (I_c[2] + I_c[6]) - mass * com[0] * com[2];
    out[7] = I_c[4] + mass * (c2 - com[1] * com[1]);
    out[8] = 0.5 * (I_c[5] + I_c[7]) - mass * com[1] * com[2];
    out[9] = I_c[8] + mass * (c2 - com[2] * com[2]);
}

/* ===================================================================== */
/*  Work sizes and model checks                                          */
/* ===================================================================== */

size_t rbg_work_size(const rbg_model *m, rbg_algo algo)
{
    const int nb = m->nbodies, nv = m->nv;
    switch (algo) {
    case RBG_ALGO_RNEA: return RBG_WORK_RNEA(nb, nv);
    case RBG_ALGO_NLE: return RBG_WORK_NLE(nb, nv);
    case RBG_ALGO_CRBA: return RBG_WORK_CRBA(nb, nv);
    case RBG_ALGO_LTDL: return RBG_WORK_LTDL(nb, nv);
    case RBG_ALGO_LTL: return RBG_WORK_LTL(nb, nv);
    case RBG_ALGO_CRBA_SOLVE: return RBG_WORK_CRBA_SOLVE(nb, nv);
    case RBG_ALGO_ABA: return RBG_WORK_ABA(nb, nv);
    default: return 0;      /* unknown, or a constrained solver (rbg_constrained_work_size) */
    }
}

int rbg_check_model(const rbg_model *m)
{
    static const int NQ[4] = {1, 2, 1, 7}, NV[4] = {1, 1, 1, 6};
    int iq = 0, iv = 0;
    if (m->nbodies < 0)
        return RBG_EMODEL;
    for (int i = 0; i < m->nbodies; ++i) {
        const int t = m->jtype[i];
        if (t < RBG_REVOLUTE || t > RBG_FREE || m->parent[i] < -1 || m->parent[i] >= i)
            return RBG_EMODEL;
        if (m->idx_q[i] != iq || m->idx_v[i] != iv || m->nvj[i] != NV[t])
            return RBG_EMODEL;
        if (m->axis_k[i] < -1 || m->axis_k[i] > 2 || (t == RBG_FREE && m->axis_k[i] != -1))
            return RBG_EMODEL;
        if (m->axis_k[i] >= 0) {
            const double *u = m->axis + 3 * i;
            for (int k = 0; k < 3; ++k)
                if (u[k] != (k == m->axis_k[i] ? 1.0 : 0.0))
                    return RBG_EMODEL;
        }
        /* dof_parent: first dof hangs from the parent's last dof, then a chain */
        const int p = m->parent[i];
        const int up = p < 0 ? -1 : m->idx_v[p] + m->nvj[p] - 1;
        for (int k = 0; k < NV[t]; ++k)
            if (m->dof_parent[iv + k] != (k == 0 ? up : iv + k - 1))
                return RBG_EMODEL;
        iq += NQ[t];
        iv += NV[t];
    }
    return iq == m->nq && iv == m->nv ? RBG_OK : RBG_EMODEL;
}

/* ===================================================================== */
/*  RNEA: inverse dynamics (RBDA Table 5.1)                              */
/* ===================================================================== */

/* a == NULL means a = 0 (nle).  work: X[12 nb] vel[6 nb] acc[6 nb] f[6 nb]. */
void rbgi_rnea_core(const rbg_model *RST m, const double *RST q, const double *RST v,
                    const double *RST a, double *RST tau, double *RST work)
{
    const int nb = m->nbodies;
    double *X = work, *vel = X + 12 * nb, *acc = vel + 6 * nb, *f = acc + 6 * nb;
    const double a0[6] = {-m->gravity[0], -m->gravity[1], -m->gravity[2], 0.0, 0.0, 0.0};

    /* --- forward pass: velocities, accelerations, body forces --- */
    for (int i = 0; i < nb; ++i) {
        double *Xi = X + 12 * i, *vi = vel + 6 * i, *ai = acc + 6 * i, *fi = f + 6 * i;
        const int p = m->parent[i], iv = m->idx_v[i];
        double vJ[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        joint_transform(m, i, q, Xi);
        /* vJ = S_i qd_i */
        S_add(m, i, v + iv, vJ);
        if (p < 0) {
            /* v_i = vJ;  a_i = X_i^-1 a_0 + S_i qdd_i   (c_i = vJ x vJ = 0) */
            memcpy(vi, vJ, sizeof vJ);
            inv_motion(Xi, a0, ai);
        } else {
            /* v_i = X_i^-1 v_p + vJ;  a_i = X_i^-1 a_p + S_i qdd_i + v_i x vJ */
            inv_motion(Xi, vel + 6 * p, vi);
            for (int k = 0; k < 6; ++k)
                vi[k] += vJ[k];
            double c[6];
            inv_motion(Xi, acc + 6 * p, ai);
            cross_motion(vi, vJ, c);
            for (int k = 0; k < 6; ++k)
                ai[k] += c[k];
        }
        if (a)
            S_add(m, i, a + iv, ai);
        /* f_i = I_i a_i + v_i x* I_i v_i */
        const double *Ii = m->inertia + RBG_INERTIA_STRIDE * i;
        double hv[6];
        rbi_apply(Ii, ai, fi);
        rbi_apply(Ii, vi, hv);
        cross_force_add(vi, hv, fi);
    }

    /* --- backward pass: tau_i = S_i^T f_i;  f_p += X_i^* f_i --- */
    for (int i = nb - 1; i >= 0; --i) {
        S_dot(m, i, f + 6 * i, tau + m->idx_v[i]);
        if (m->parent[i] >= 0)
            act_force_add(X + 12 * i, f + 6 * i, f + 6 * m->parent[i]);
    }
}

int rbg_rnea(const rbg_model *RST m, const double *RST q, const double *RST v,
             const double *RST a, double *RST tau, double *RST work)
{
    if (!all_finite(q, m->nq) || !all_finite(v, m->nv) || !all_finite(a, m->nv))
        return RBG_EINPUT;
    rbgi_rnea_core(m, q, v, a, tau, work);
    return RBG_OK;
}

int rbg_nle(const rbg_model *RST m, const double *RST q, const double *RST v,
            double *RST b, double *RST work)
{
    if (!all_finite(q, m->nq) || !all_finite(v, m->nv))
        return RBG_EINPUT;
    rbgi_rnea_core(m, q, v, NULL, b, work);
    return RBG_OK;
}

/* ===================================================================== */
/*  CRBA: joint-space inertia matrix (RBDA Table 6.2, world frame)       */
/* ===================================================================== */

/* Writes the nonzero pattern of M (row-major nv x nv): the lower triangle
 * M[r][c], c an ancestor-or-self dof of r, and its mirror when `mirror`.
 * Entries outside the pattern are not touched.
 *
 * RBDA Table 6.2 evaluated in WORLD coordinates (as Pinocchio's crba does): with
 * every quantity expressed in one fixed frame, the walk "F = X_j^* F up the support"
 * of the local form becomes the identity, and each entry is a 6-term dot product:
 *   oX_i = oX_parent X_i                       body placements
 *   J_r  = oX_i S_i e_k                        world motion subspace of dof r
 *   Yc_i = oX_i^* I_i oX_i^-1 + sum_children Yc_c   composite inertias (world)
 *   M_rc = J_c^T (Yc_i J_r)  for c in the lambda-chain of r (r itself included)
 * The fixed frame has the world's axes and body 0's origin (M does not depend on it):
 * positions stay robot-sized wherever the robot is, so the p x terms of J and Yc keep
 * their accuracy far from the world origin.
 * work: oX[12 nb] Yc[10 nb] J[6 nv]. */
void rbgi_crba_core(const rbg_model *RST m, const double *RST q, double *RST M,
                    double *RST work, int mirror)
{
    const int nb = m->nbodies, nv = m->nv;
    const int *lam = m->dof_parent;
    double *oX = work, *Yc = oX + 12 * nb, *J = Yc + 10 * nb;
    double o[3] = {0.0, 0.0, 0.0};          /* world position of body 0's origin */

    /* --- forward: oX_i, J_r, Yc_i = oX_i^* I_i --- */
    for (int i = 0; i < nb; ++i) {
        double Xi[12], *Xo = oX + 12 * i;
        joint_transform(m, i, q, Xi);
        world_placement(m, i, Xi, oX, o);
        world_subspace(m, i, Xo, J + 6 * m->idx_v[i]);
        memset(Yc + 10 * i, 0, 10 * sizeof(double));
        rbi_act_add(Xo, m->inertia + RBG_INERTIA_STRIDE * i, Yc + 10 * i);
    }

    /* --- backward: Yc_parent += Yc_i (same frame, plain sums) --- */
    for (int i = nb - 1; i > 0; --i) {
        const int p = m->parent[i];
        if (p >= 0)
            for (int e = 0; e < 10; ++e)
                Yc[10 * p + e] += Yc[10 * i + e];
    }

    /* --- M_rc = J_c^T F_r with F_r = Yc_i J_r, c walking lambda from r --- */
    for (int i = 0; i < nb; ++i) {
        const int iv = m->idx_v[i];
        for (int k = 0; k < m->nvj[i]; ++k) {
            const int r = iv + k;
            double F[6];
            rbi_apply(Yc + 10 * i, J + 6 * r, F);
            double *Mr = M + (size_t)nv * r;
            for (int c = r; c >= 0; c = lam[c]) {
                const double *Jc = J + 6 * c;
                const double e = Jc[0] * F[0] + Jc[1] * F[1] + Jc[2] * F[2]
                                 + Jc[3] * F[3] + Jc[4] * F[4] + Jc[5] * F[5];
                Mr[c] = e;
                if (mirror)
                    M[(size_t)nv * c + r] = e;
            }
        }
    }
}

int rbg_crba(const rbg_model *RST m, const double *RST q, double *RST M, double *RST work)
{
    if (!all_finite(q, m->nq))
        return RBG_EINPUT;
    memset(M, 0, (size_t)m->nv * (size_t)m->nv * sizeof(double));
    rbgi_crba_core(m, q, M, work, 1);
    return RBG_OK;
}

/* ===================================================================== */
/*  Sparse factorisations over lambda (Featherstone 2005 Table 2)        */
/* ===================================================================== */

/* In place H = L^T D L on the lower triangle (D on the diagonal, L_ki below):
 *   for k = n-1 .. 0:  for i in lambda-chain(lambda(k)):
 *       a = H_ki / H_kk;  H_ij -= a H_kj  for j in chain(i);  H_ki = a */
int rbgi_ltdl_inplace(const int *RST lam, int n, double *RST H)
{
    for (int k = n - 1; k >= 0; --k) {
        const double *Hk = H + (size_t)n * k;
        if (!(Hk[k] > 0.0))
            return RBG_ESINGULAR;
        const double dinv = 1.0 / Hk[k];
        for (int i = lam[k]; i >= 0; i = lam[i]) {
            const double a = Hk[i] * dinv;
            double *Hi = H + (size_t)n * i;
            for (int j = i; j >= 0; j = lam[j])
                Hi[j] -= a * Hk[j];
            H[(size_t)n * k + i] = a;
        }
    }
    return RBG_OK;
}

/* In place H = L^T L on the lower triangle:
 *   for k = n-1 .. 0:  H_kk = sqrt(H_kk);  H_ki /= H_kk  (i in chain(lambda(k)));
 *                      H_ij -= H_ki H_kj  (i in chain(lambda(k)), j in chain(i)) */
int rbgi_ltl_inplace(const int *RST lam, int n, double *RST H)
{
    for (int k = n - 1; k >= 0; --k) {
        double *Hk = H + (size_t)n * k;
        if (!(Hk[k] > 0.0))
            return RBG_ESINGULAR;
        Hk[k] = sqrt(Hk[k]);
        const double dinv = 1.0 / Hk[k];
        for (int i = lam[k]; i >= 0; i = lam[i])
            Hk[i] *= dinv;
        for (int i = lam[k]; i >= 0; i = lam[i]) {
            double *Hi = H + (size_t)n * i;
            for (int j = i; j >= 0; j = lam[j])
                Hi[j] -= Hk[i] * Hk[j];
        }
    }
    return RBG_OK;
}

int rbg_ltdl(const rbg_model *RST m, const double *RST q, double *RST L, double *RST D,
             double *RST work)
{
    const int n = m->nv;
    if (!all_finite(q, m->nq))
        return RBG_EINPUT;
    memset(L, 0, (size_t)n * (size_t)n * sizeof(double));
    rbgi_crba_core(m, q, L, work, 0);
    const int rc = rbgi_ltdl_inplace(m->dof_parent, n, L);
    if (rc)
        return rc;
    for (int k = 0; k < n; ++k) {
        D[k] = L[(size_t)n * k + k];
        L[(size_t)n * k + k] = 1.0;
    }
    return RBG_OK;
}

int rbg_ltl(const rbg_model *RST m, const double *RST q, double *RST L, double *RST work)
{
    const int n = m->nv;
    if (!all_finite(q, m->nq))
        return RBG_EINPUT;
    memset(L, 0, (size_t)n * (size_t)n * sizeof(double));
    rbgi_crba_core(m, q, L, work, 0);
    return rbgi_ltl_inplace(m->dof_parent, n, L);
}

/* x = H^-1 b = L^-1 D^-1 L^-T b (Featherstone 2005 §5, Table 3):
 *   L^T y = b  back-substitution leaves -> root:  x_i = y_i;  y_j -= L_ij x_i  (j in chain(lambda(i)))
 *   y_i /= D_i
 *   L x = y    forward-substitution root -> leaves:  x_i = y_i - sum_{j in chain(lambda(i))} L_ij x_j */
int rbg_crba_solve(const rbg_model *RST m, const double *RST q, const double *RST b,
                   double *RST x, double *RST work)
{
    const int n = m->nv;
    const int *lam = m->dof_parent;
    double *H = work;
    if (!all_finite(q, m->nq) || !all_finite(b, n))
        return RBG_EINPUT;
    /* only entries on lambda-chains are read below, so H needs no clearing */
    rbgi_crba_core(m, q, H, work + (size_t)n * (size_t)n, 0);
    const int rc = rbgi_ltdl_inplace(lam, n, H);
    if (rc)
        return rc;
    memcpy(x, b, (size_t)n * sizeof(double));
    for (int i = n - 1; i >= 0; --i) {
        const double *Hi = H + (size_t)n * i;
        for (int j = lam[i]; j >= 0; j = lam[j])
            x[j] -= Hi[j] * x[i];
    }
    for (int i = 0; i < n; ++i) {
        const double *Hi = H + (size_t)n * i;
        double s = x[i] / Hi[i];
        for (int j = lam[i]; j >= 0; j = lam[j])
            s -= Hi[j] * x[j];
        x[i] = s;
    }
    return RBG_OK;
}

/* ===================================================================== */
/*  ABA: forward dynamics (RBDA Table 7.1)                               */
/* ===================================================================== */

void rbgi_forward_velocities(const rbg_model *RST m, const double *RST q, const double *RST v,
                             double *RST X, double *RST vel, double *RST c)
{
    for (int i = 0; i < m->nbodies; ++i) {
        double *Xi = X + 12 * i, *vi = vel + 6 * i, *ci = c + 6 * i;
        const int p = m->parent[i];
        double vJ[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        joint_transform(m, i, q, Xi);
        S_add(m, i, v + m->idx_v[i], vJ);
        if (p < 0) {
            memcpy(vi, vJ, sizeof vJ);
            memset(ci, 0, 6 * sizeof(double));
        } else {
            inv_motion(Xi, vel + 6 * p, vi);
            for (int k = 0; k < 6; ++k)
                vi[k] += vJ[k];
            cross_motion(vi, vJ, ci);
        }
    }
}

rbgi_aba rbgi_aba_layout(const rbg_model *RST m, double *RST work)
{
    const int nb = m->nbodies;
    rbgi_aba w;
    w.X = work;
    w.vel = w.X + 12 * nb;
    w.c = w.vel + 6 * nb;
    w.IA = w.c + 6 * nb;
    w.pA = w.IA + 36 * nb;
    w.U = w.pA + 6 * nb;
    w.acc = w.U + 6 * nb;
    w.Dinv = w.acc + 6 * nb;
    w.ud = w.Dinv + nb;
    return w;
}

void rbgi_aba_forward(const rbg_model *RST m, const double *RST q, const double *RST v,
                      const rbgi_aba *RST w)
{
    /* v_i = X_i^-1 v_p + S_i qd_i,  c_i = v_i x S_i qd_i */
    rbgi_forward_velocities(m, q, v, w->X, w->vel, w->c);
    /* IA_i = I_i,  pA_i = v_i x* I_i v_i */
    for (int i = 0; i < m->nbodies; ++i) {
        const double *Ii = m->inertia + RBG_INERTIA_STRIDE * i, *vi = w->vel + 6 * i;
        double hv[6];
        rbi_matrix(Ii, w->IA + 36 * i);
        rbi_apply(Ii, vi, hv);
        memset(w->pA + 6 * i, 0, 6 * sizeof(double));
        cross_force_add(vi, hv, w->pA + 6 * i);
    }
}

int rbgi_aba_backward(const rbg_model *RST m, const double *RST tau, const rbgi_aba *RST w)
{
    double *IA = w->IA, *pA = w->pA, *ud = w->ud;
    for (int i = m->nbodies - 1; i >= 0; --i) {
        double *IAi = IA + 36 * i, *pAi = pA + 6 * i, *Ui = w->U + 6 * i;
        const int p = m->parent[i], iv = m->idx_v[i];
        if (m->jtype[i] == RBG_FREE) {
            /* D = IA_i (S = 1):  u = tau_i - pA_i,  ud = IA_i^-1 u.
               Ia = IA - IA IA^-1 IA = 0 and pa = pA + IA IA^-1 u = tau_i, so the
               parent only receives  pA_p += X_i^* tau_i. */
            double *x = ud + iv;
            for (int k = 0; k < 6; ++k)
                x[k] = tau[iv + k] - pAi[k];
            if (ldlt6_factor(IAi))
                return RBG_ESINGULAR;
            ldlt6_solve(IAi, x);
            if (p >= 0)
                act_force_add(w->X + 12 * i, tau + iv, pA + 6 * p);
            continue;
        }
        /* U_i = IA_i S_i,  D_i = S_i^T U_i,  u_i = tau_i - S_i^T pA_i */
        const double D = joint_U(m, i, IAi, Ui);
        if (!(D > 0.0))
            return RBG_ESINGULAR;
        w->Dinv[i] = 1.0 / D;
        ud[iv] = (tau[iv] - S_dot1(m, i, pAi)) * w->Dinv[i];
        if (p < 0)
            continue;
        /* Ia = IA_i - U_i D_i^-1 U_i^T  (in place, symmetric) */
        articulated_update(IAi, Ui, w->Dinv[i]);
        /* pa = pA_i + Ia c_i + U_i D_i^-1 u_i */
        double pa[6];
        const double *ci = w->c + 6 * i;
        for (int r = 0; r < 6; ++r) {
            const double *row = IAi + 6 * r;
            pa[r] = pAi[r] + row[0] * ci[0] + row[1] * ci[1] + row[2] * ci[2] + row[3] * ci[3]
                    + row[4] * ci[4] + row[5] * ci[5] + Ui[r] * ud[iv];
        }
        /* IA_p += X_i^* Ia X_i^-1;  pA_p += X_i^* pa */
        inertia6_act_add(w->X + 12 * i, IAi, IA + 36 * p);
        act_force_add(w->X + 12 * i, pa, pA + 6 * p);
    }
    return RBG_OK;
}

void rbgi_aba_rollout(const rbg_model *RST m, int i, const rbgi_aba *RST w, double *RST ddq)
{
    const double a0[6] = {-m->gravity[0], -m->gravity[1], -m->gravity[2], 0.0, 0.0, 0.0};
    double *ai = w->acc + 6 * i;
    const int p = m->parent[i], iv = m->idx_v[i];
    /* a' = X_i^-1 a_p + c_i */
    inv_motion(w->X + 12 * i, p < 0 ? a0 : w->acc + 6 * p, ai);
    for (int k = 0; k < 6; ++k)
        ai[k] += w->c[6 * i + k];
    if (m->jtype[i] == RBG_FREE) {
        /* qdd = IA^-1 (u - IA a') = ud - a';  a_i = a' + qdd = ud */
        for (int k = 0; k < 6; ++k) {
            ddq[iv + k] = w->ud[iv + k] - ai[k];
            ai[k] = w->ud[iv + k];
        }
    } else {
        /* qdd_i = D_i^-1 u_i - D_i^-1 U_i^T a';  a_i = a' + S_i qdd_i */
        const double *Ui = w->U + 6 * i;
        const double qdd = w->ud[iv] - w->Dinv[i] * (Ui[0] * ai[0] + Ui[1] * ai[1] + Ui[2] * ai[2]
                                                     + Ui[3] * ai[3] + Ui[4] * ai[4] + Ui[5] * ai[5]);
        ddq[iv] = qdd;
        S_add1(m, i, qdd, ai);
    }
}

/* work: RBG_WORK_ABA, laid out as rbgi_aba (rbg_internal.h). */
int rbg_aba(const rbg_model *RST m, const double *RST q, const double *RST v,
            const double *RST tau, double *RST ddq, double *RST work)
{
    const rbgi_aba w = rbgi_aba_layout(m, work);
    if (!all_finite(q, m->nq) || !all_finite(v, m->nv) || !all_finite(tau, m->nv))
        return RBG_EINPUT;
    /* pass 1 (forward): velocities, IA_i = I_i, pA_i = v_i x* I_i v_i */
    rbgi_aba_forward(m, q, v, &w);
    /* pass 2 (backward): articulated inertias and bias forces */
    const int rc = rbgi_aba_backward(m, tau, &w);
    if (rc)
        return rc;
    /* pass 3 (forward): accelerations, a_0 = -g */
    for (int i = 0; i < m->nbodies; ++i)
        rbgi_aba_rollout(m, i, &w, ddq);
    return RBG_OK;
}
