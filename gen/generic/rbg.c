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
    case RBG_ALGO_RNEA_DERIVATIVES: return RBG_WORK_RNEA_DERIVATIVES(nb, nv);
    case RBG_ALGO_ABA_DERIVATIVES: return RBG_WORK_ABA_DERIVATIVES(nb, nv);
    default: return 0;      /* unknown, or a constrained solver (rbg_constrained_work_size) */
    }
}

int rbg_check_model(const rbg_model *m)
{
    static const int NQ[7] = {1, 2, 1, 7, 4, 4, 1}, NV[7] = {1, 1, 1, 6, 3, 3, 1};
    int iq = 0, iv = 0;
    if (m->nbodies < 0)
        return RBG_EMODEL;
    for (int i = 0; i < m->nbodies; ++i) {
        const int t = m->jtype[i];
        if (t < RBG_REVOLUTE || t > RBG_HELICAL || m->parent[i] < -1 || m->parent[i] >= i)
            return RBG_EMODEL;
        if (m->idx_q[i] != iq || m->idx_v[i] != iv || m->nvj[i] != NV[t])
            return RBG_EMODEL;
        if (m->axis_k[i] < -1 || m->axis_k[i] > 2 || (NV[t] > 1 && m->axis_k[i] != -1))
            return RBG_EMODEL;
        if (t == RBG_HELICAL && !(m->pitch && isfinite(m->pitch[i])))
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
            if (ldlt_factor(IAi, 6))
                return RBG_ESINGULAR;
            ldlt_solve(IAi, 6, x);
            if (p >= 0)
                act_force_add(w->X + 12 * i, tau + iv, pA + 6 * p);
            continue;
        }
        if (m->nvj[i] == 3) {
            /* U_i = IA_i S_i, D_i = S_i^T U_i, Ia = IA_i - U_i D_i^-1 U_i^T (joint_step3);
               u_i = tau_i - S_i^T pA_i,  ud = D_i^-1 u_i */
            double Ia[36], *x = ud + iv;
            S_dot(m, i, pAi, x);
            for (int k = 0; k < 3; ++k)
                x[k] = tau[iv + k] - x[k];
            if (joint_step3(m, i, IAi, p >= 0 ? Ia : NULL))
                return RBG_ESINGULAR;
            ldlt_solve(joint_D3(IAi), 3, x);
            if (p < 0)
                continue;
            /* pa = pA_i + Ia c_i + U_i D_i^-1 u_i;  IA_p += X_i^* Ia X_i^-1;  pA_p += X_i^* pa */
            double pa[6];
            const double *ci = w->c + 6 * i, *U = joint_U3(IAi);
            for (int r = 0; r < 6; ++r) {
                const double *row = Ia + 6 * r;
                pa[r] = pAi[r] + row[0] * ci[0] + row[1] * ci[1] + row[2] * ci[2] + row[3] * ci[3]
                        + row[4] * ci[4] + row[5] * ci[5] + U[r] * x[0] + U[6 + r] * x[1] + U[12 + r] * x[2];
            }
            inertia6_act_add(w->X + 12 * i, Ia, IA + 36 * p);
            act_force_add(w->X + 12 * i, pa, pA + 6 * p);
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
        joint_qdd(m, i, w, ai, ddq + iv);
        S_add(m, i, ddq + iv, ai);
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

/* ===================================================================== */
/*  Analytical derivatives (Carpentier & Mansard, RSS 2018)              */
/* ===================================================================== */

/*
 * Everything here is in WORLD coordinates (world axes, body 0's origin, as rbg_crba;
 * tau and its derivatives do not depend on the origin, and a_0 = -g is a pure linear
 * acceleration, the same at every origin).  With p = parent(i), a_0 = -g, J_r = oX_i
 * S_i e_k the subspace of dof r of body i (RSS 2018 §III, Pinocchio's oMi-quantities;
 * the derivation is gen/algorithms/world.py's):
 *
 *   ov_i = ov_p + J_i v_i,   oa_i = oa_p + J_i a_i + ov_i x (J_i v_i)
 *   oI_i = oX_i^* I_i oX_i^-1,   h_i = oI_i ov_i,   of_i = oI_i oa_i + ov_i x* h_i
 *   B_i w = ov_i x* (oI_i w) - oI_i (ov_i x w) + w x* h_i       (body Coriolis matrix)
 *   per dof column u = J_r of body i:
 *     dVdq_r = ov_p x u,   dAdq_r = oa_p x u + ov_p x dVdq_r,   dAdv_r = (ov_p + ov_i) x u
 *   backward subtree sums: Ycrb_i = sum oI_k, Bc_i = sum B_k, F_i = sum of_k  (k in subtree(i))
 *   for j an ancestor of i or i itself (RSS 2018 Alg. 1, projections):
 *     dtau_i/dq_j = J_i^T (Ycrb_i dAdq_j + Bc_i dVdq_j)
 *     dtau_i/dv_j = J_i^T (Ycrb_i dAdv_j + Bc_i J_j)
 *     M_ij        = J_i^T Ycrb_i J_j
 *   and for j a strict ancestor of i (the transposed blocks):
 *     dtau_j/dq_i = J_j^T (J_i x* F_i + Ycrb_i dAdq_i + Bc_i dVdq_i)
 *     dtau_j/dv_i = J_j^T (Ycrb_i dAdv_i + Bc_i J_i)
 *
 * Layout of the workspace (RBG_WORK_RNEA_DERIVATIVES = 76 nb + 24 nv):
 *   oX[12 nb] ov[6 nb] oa[6 nb] Yc[10 nb] F[6 nb] Bc[36 nb] (column-major 6x6),
 *   J[6 nv] dVdq[6 nv] dAdq[6 nv] dAdv[6 nv].
 */
typedef struct rbgi_deriv {
    double *oX, *ov, *oa, *Yc, *F, *Bc, *J, *dVdq, *dAdq, *dAdv;
} rbgi_deriv;

static rbgi_deriv deriv_layout(const rbg_model *RST m, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv;
    rbgi_deriv w;
    w.oX = work;
    w.ov = w.oX + 12 * nb;
    w.oa = w.ov + 6 * nb;
    w.Yc = w.oa + 6 * nb;
    w.F = w.Yc + 10 * nb;
    w.Bc = w.F + 6 * nb;
    w.J = w.Bc + 36 * nb;
    w.dVdq = w.J + 6 * nv;
    w.dAdq = w.dVdq + 6 * nv;
    w.dAdv = w.dAdq + 6 * nv;
    return w;
}

static inline double dot6(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5];
}

/* out = B x for B column-major 6x6 */
static inline void mat6_apply(const double *RST B, const double *RST x, double *RST out)
{
    for (int r = 0; r < 6; ++r)
        out[r] = 0.0;
    for (int c = 0; c < 6; ++c)
        for (int r = 0; r < 6; ++r)
            out[r] += B[6 * c + r] * x[c];
}

/* Forward pass and subtree sums (the formulas above) at (q, v, a). */
static void deriv_forward_backward(const rbg_model *RST m, const double *RST q, const double *RST v,
                                   const double *RST a, const rbgi_deriv *RST w)
{
    const int nb = m->nbodies;
    const double a0[6] = {-m->gravity[0], -m->gravity[1], -m->gravity[2], 0.0, 0.0, 0.0};
    const double zero[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double o[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < nb; ++i) {
        const int p = m->parent[i], iv = m->idx_v[i], n = m->nvj[i];
        double Xi[12];
        double *Xo = w->oX + 12 * i, *vi = w->ov + 6 * i, *ai = w->oa + 6 * i;
        double *Ii = w->Yc + 10 * i, *fi = w->F + 6 * i, *Bi = w->Bc + 36 * i;
        const double *vp = p < 0 ? zero : w->ov + 6 * p, *ap = p < 0 ? a0 : w->oa + 6 * p;
        joint_transform(m, i, q, Xi);
        world_placement(m, i, Xi, w->oX, o);
        world_subspace(m, i, Xo, w->J + 6 * iv);
        /* vJ = J_i v_i;  ov_i = ov_p + vJ;  oa_i = oa_p + J_i a_i + ov_i x vJ */
        double vJ[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, c[6];
        for (int k = 0; k < n; ++k)
            for (int e = 0; e < 6; ++e)
                vJ[e] += w->J[6 * (iv + k) + e] * v[iv + k];
        for (int e = 0; e < 6; ++e)
            vi[e] = vp[e] + vJ[e];
        cross_motion(vi, vJ, c);
        for (int e = 0; e < 6; ++e)
            ai[e] = ap[e] + c[e];
        for (int k = 0; k < n; ++k)
            for (int e = 0; e < 6; ++e)
                ai[e] += w->J[6 * (iv + k) + e] * a[iv + k];
        /* oI_i = oX_i^* I_i oX_i^-1 (10 parameters about the frame origin) */
        memset(Ii, 0, 10 * sizeof(double));
        rbi_act_add(Xo, m->inertia + RBG_INERTIA_STRIDE * i, Ii);
        /* h = oI ov;  of_i = oI oa + ov x* h */
        double h[6];
        rbi_apply(Ii, vi, h);
        rbi_apply(Ii, ai, fi);
        cross_force_add(vi, h, fi);
        /* B_i e_c = ov x* (oI e_c) - oI (ov x e_c) + e_c x* h, column by column */
        for (int col = 0; col < 6; ++col) {
            double e[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, Ie[6], ve[6], Ive[6];
            double *Bcol = Bi + 6 * col;
            e[col] = 1.0;
            rbi_apply(Ii, e, Ie);
            cross_motion(vi, e, ve);
            rbi_apply(Ii, ve, Ive);
            for (int r = 0; r < 6; ++r)
                Bcol[r] = -Ive[r];
            cross_force_add(vi, Ie, Bcol);
            cross_force_add(e, h, Bcol);
        }
        /* per dof: dVdq = ov_p x u, dAdq = oa_p x u + ov_p x dVdq, dAdv = (ov_p + ov_i) x u */
        double vs[6];
        for (int e = 0; e < 6; ++e)
            vs[e] = vp[e] + vi[e];
        for (int k = 0; k < n; ++k) {
            const int r = iv + k;
            const double *u = w->J + 6 * r;
            double *dV = w->dVdq + 6 * r, *dA = w->dAdq + 6 * r, t[6];
            cross_motion(vp, u, dV);
            cross_motion(ap, u, dA);
            cross_motion(vp, dV, t);
            for (int e = 0; e < 6; ++e)
                dA[e] += t[e];
            cross_motion(vs, u, w->dAdv + 6 * r);
        }
    }
    /* subtree sums, leaves to root (same frame: plain sums) */
    for (int i = nb - 1; i > 0; --i) {
        const int p = m->parent[i];
        if (p < 0)
            continue;
        for (int e = 0; e < 10; ++e)
            w->Yc[10 * p + e] += w->Yc[10 * i + e];
        for (int e = 0; e < 6; ++e)
            w->F[6 * p + e] += w->F[6 * i + e];
        for (int e = 0; e < 36; ++e)
            w->Bc[36 * p + e] += w->Bc[36 * i + e];
    }
}

/* The projections (formulas above) into dq, dv (row-major nv x nv, zeroed by the caller
 * or not: every entry on an ancestor pattern is written) and the lower triangle of M
 * (M == NULL: skipped; `mirror`: the upper triangle too). */
static void deriv_project(const rbg_model *RST m, const rbgi_deriv *RST w, double *RST dq, double *RST dv,
                          double *RST M, int mirror)
{
    const int nb = m->nbodies;
    const size_t nv = (size_t)m->nv;
    for (int i = 0; i < nb; ++i) {
        const int iv = m->idx_v[i], n = m->nvj[i];
        const double *Yi = w->Yc + 10 * i, *Bi = w->Bc + 36 * i, *Fi = w->F + 6 * i;
        double G[36], H[36], YJ[36], BJ[36];
        for (int k = 0; k < n; ++k) {
            const int r = iv + k;
            const double *u = w->J + 6 * r;
            double t[6];
            /* rows: YJ_r = Ycrb_i J_r (Ycrb symmetric), BJ_r = Bc_i^T J_r */
            rbi_apply(Yi, u, YJ + 6 * k);
            for (int c = 0; c < 6; ++c)
                BJ[6 * k + c] = dot6(Bi + 6 * c, u);
            /* columns seen from the strict ancestors:
               G_r = J_r x* F_i + Ycrb_i dAdq_r + Bc_i dVdq_r,  H_r = Ycrb_i dAdv_r + Bc_i J_r */
            double *Gr = G + 6 * k, *Hr = H + 6 * k;
            rbi_apply(Yi, w->dAdq + 6 * r, Gr);
            mat6_apply(Bi, w->dVdq + 6 * r, t);
            for (int e = 0; e < 6; ++e)
                Gr[e] += t[e];
            cross_force_add(u, Fi, Gr);
            rbi_apply(Yi, w->dAdv + 6 * r, Hr);
            mat6_apply(Bi, u, t);
            for (int e = 0; e < 6; ++e)
                Hr[e] += t[e];
        }
        for (int j = i; j >= 0; j = m->parent[j]) {
            const int jv = m->idx_v[j], nj = m->nvj[j];
            for (int k = 0; k < n; ++k) {
                const size_t r = (size_t)(iv + k);
                const double *YJr = YJ + 6 * k, *BJr = BJ + 6 * k;
                for (int l = 0; l < nj; ++l) {
                    const size_t c = (size_t)(jv + l);
                    const double *Jc = w->J + 6 * c;
                    /* dtau_r/dq_c = J_r^T (Ycrb_i dAdq_c + Bc_i dVdq_c), same for v */
                    dq[nv * r + c] = dot6(YJr, w->dAdq + 6 * c) + dot6(BJr, w->dVdq + 6 * c);
                    dv[nv * r + c] = dot6(YJr, w->dAdv + 6 * c) + dot6(BJr, Jc);
                    /* M_rc = J_r^T Ycrb_i J_c: lower triangle (c <= r) */
                    if (M && c <= r) {
                        const double e = dot6(YJr, Jc);
                        M[nv * r + c] = e;
                        if (mirror)
                            M[nv * c + r] = e;
                    }
                    if (j != i) {
                        /* dtau_c/dq_r = J_c^T G_r,  dtau_c/dv_r = J_c^T H_r */
                        dq[nv * c + r] = dot6(Jc, G + 6 * k);
                        dv[nv * c + r] = dot6(Jc, H + 6 * k);
                    }
                }
            }
        }
    }
}

/* tau_r = J_r^T F_i for every dof r of body i: RNEA's projection of the subtree forces
 * (rnea(q, v, a) for a pass at a). */
static void deriv_tau(const rbg_model *RST m, const rbgi_deriv *RST w, double *RST tau)
{
    for (int i = 0; i < m->nbodies; ++i)
        for (int k = 0; k < m->nvj[i]; ++k)
            tau[m->idx_v[i] + k] = dot6(w->J + 6 * (m->idx_v[i] + k), w->F + 6 * i);
}

int rbg_rnea_derivatives(const rbg_model *RST m, const double *RST q, const double *RST v,
                         const double *RST a, double *RST dtau_dq, double *RST dtau_dv,
                         double *RST M, double *RST tau, double *RST work)
{
    const size_t nn = (size_t)m->nv * (size_t)m->nv;
    if (!all_finite(q, m->nq) || !all_finite(v, m->nv) || !all_finite(a, m->nv))
        return RBG_EINPUT;
    const rbgi_deriv w = deriv_layout(m, work);
    memset(dtau_dq, 0, nn * sizeof(double));
    memset(dtau_dv, 0, nn * sizeof(double));
    memset(M, 0, nn * sizeof(double));
    deriv_forward_backward(m, q, v, a, &w);
    deriv_project(m, &w, dtau_dq, dtau_dv, M, 1);
    deriv_tau(m, &w, tau);
    return RBG_OK;
}

/* x <- H^-1 x with H = L^T D L factored in place by rbgi_ltdl_inplace (Featherstone 2005
 * §5, Table 3; as rbg_crba_solve), x read and written with stride `s`. */
static void ltdl_solve_strided(const int *RST lam, int n, const double *RST H, double *RST x, size_t s)
{
    for (int i = n - 1; i >= 0; --i) {
        const double *Hi = H + (size_t)n * i;
        for (int j = lam[i]; j >= 0; j = lam[j])
            x[s * j] -= Hi[j] * x[s * i];
    }
    for (int i = 0; i < n; ++i) {
        const double *Hi = H + (size_t)n * i;
        double t = x[s * i] / Hi[i];
        for (int j = lam[i]; j >= 0; j = lam[j])
            t -= Hi[j] * x[s * j];
        x[s * i] = t;
    }
}

/*
 * ABA derivatives (RSS 2018 §IV): rnea(q, v, aba(q, v, tau)) = tau for all arguments, so
 *   dddq/dx = -M^-1 dtau/dx |_(a = ddq)  (x = q, v),   dddq/dtau = M^-1.
 * ddq by rbg_aba (RBDA Table 7.1), written to the output ddq (the value the derivatives
 * are taken at); dtau/dq, dtau/dv and M by the world-frame pass above
 * at a = ddq (M comes free with the projections, no CRBA pass); M = L^T D L by the
 * sparse factorisation over the dof parents (Featherstone 2005 Table 2), then each
 * column of M^-1 (lower triangle, mirrored: exactly symmetric) and of -M^-1 dtau/dq,
 * -M^-1 dtau/dv by the sparse substitutions (§5).  Cost beyond the derivatives pass:
 * one ABA, the factorisation O(nv d^2) and 3 nv substitutions O(nv^2 d) (d = the depth
 * in dofs), instead of the O(nv^3) dense products with M^-1.
 * Workspace (RBG_WORK_ABA_DERIVATIVES = nv^2 + 25 nv + 76 nb): H[nv^2] (the factor),
 * x[nv], then the derivatives pass's 76 nb + 24 nv (rbg_aba's 79 nb + nv fits there
 * since nv >= nb).
 */
int rbg_aba_derivatives(const rbg_model *RST m, const double *RST q, const double *RST v,
                        const double *RST tau, double *RST ddq_dq, double *RST ddq_dv,
                        double *RST Minv, double *RST ddq, double *RST work)
{
    const int n = m->nv;
    const size_t nn = (size_t)n * (size_t)n;
    const int *lam = m->dof_parent;
    double *H = work, *x = H + nn, *rest = x + n;
    if (!all_finite(q, m->nq) || !all_finite(v, n) || !all_finite(tau, n))
        return RBG_EINPUT;
    int rc = rbg_aba(m, q, v, tau, ddq, rest);
    if (rc)
        return rc;
    const rbgi_deriv w = deriv_layout(m, rest);
    memset(ddq_dq, 0, nn * sizeof(double));
    memset(ddq_dv, 0, nn * sizeof(double));
    deriv_forward_backward(m, q, v, ddq, &w);
    /* dtau/dq, dtau/dv into the outputs; the lower triangle of M into H */
    deriv_project(m, &w, ddq_dq, ddq_dv, H, 0);
    rc = rbgi_ltdl_inplace(lam, n, H);
    if (rc)
        return rc;
    /* M^-1 e_k, entries r >= k kept and mirrored */
    for (int k = 0; k < n; ++k) {
        memset(x, 0, (size_t)n * sizeof(double));
        x[k] = 1.0;
        ltdl_solve_strided(lam, n, H, x, 1);
        for (int r = k; r < n; ++r) {
            Minv[(size_t)n * r + k] = x[r];
            Minv[(size_t)n * k + r] = x[r];
        }
    }
    /* dddq/dq = -M^-1 dtau/dq, dddq/dv = -M^-1 dtau/dv, column by column in place */
    for (size_t e = 0; e < nn; ++e) {
        ddq_dq[e] = -ddq_dq[e];
        ddq_dv[e] = -ddq_dv[e];
    }
    for (int c = 0; c < n; ++c) {
        ltdl_solve_strided(lam, n, H, ddq_dq + c, (size_t)n);
        ltdl_solve_strided(lam, n, H, ddq_dv + c, (size_t)n);
    }
    return RBG_OK;
}
