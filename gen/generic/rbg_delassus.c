/*
 * rbg_delassus.c -- generic C for the Delassus matrix J M^-1 J^T and the damped Delassus
 * inverse Lambda_mu = (J M^-1 J^T + R)^-1 (the operational-space inertia, OSIM), the
 * robot and the constraint set passed as data (see rbg.h, section "Delassus").
 * Counterparts of rbdgen's gen/algorithms/delassus.py, ltl_osim.py, caba_osim.py and
 * kkt_osim.py: same matrices up to rounding.
 *
 * References: R. Featherstone, Efficient Factorization of the Joint-Space Inertia Matrix
 * for Branched Kinematic Trees, IJRR 2005 (Table 2 LTDL / LTL, Table 3 and §5 sparse
 * substitutions);  A. Sathya, J. Carpentier, Constrained Articulated Body Dynamics
 * Algorithms, 2024 (eq. 13b, 40, 41, Alg. 4-5, §VIII-C);  J. Carpentier, R. Budhiraja,
 * N. Mansard, Proximal and Sparse Resolution of Constrained Dynamic Equations, RSS 2021
 * (Alg. 1, eq. 24, §IV-E).
 *
 * Notation: R = diag(rho), rho = mu / weight per row (Pinocchio's damping), W = R^-1
 * (Sathya's penalty); J the LOCAL constraint Jacobian (m x nv), K (size x 6) a
 * constraint's rows on the LOCAL motion of its moving body.  Matrices are row-major;
 * lower triangles are computed and mirrored, so every output is exactly symmetric.
 */
#include "rbg_internal.h"

/* ===================================================================== */
/*  Helpers                                                              */
/* ===================================================================== */

static int bad_mu(double mu)
{
    return !(mu > 0.0) || !isfinite(mu);
}

/* The last dof of body b (-1 for the world). */
static inline int last_dof(const rbg_model *RST m, int b)
{
    return b < 0 ? -1 : m->idx_v[b] + m->nvj[b] - 1;
}

/* The next dof, descending, of the union of the two lambda-chains at *a and *b (the
 * dofs supporting a constraint's two frames and their ancestors); -1 when both end. */
static inline int next_dof(const int *RST lam, int *RST a, int *RST b)
{
    const int i = *a > *b ? *a : *b;
    if (i >= 0) {
        if (*a == i)
            *a = lam[i];
        if (*b == i)
            *b = lam[i];
    }
    return i;
}

/* J (m x nv, LOCAL rows) from the placements oX_i and dof subspaces that rbgi_crba_core
 * leaves in its workspace crba, in the frame with the world's axes at body 0's origin
 * o = the translation of X_0. */
static void jacobian(const rbg_model *RST m, const rbg_constraints *RST c, const double *RST q,
                     const double *RST crba, double *RST J)
{
    const double *oX = crba, *Jw = crba + 22 * m->nbodies;
    double X0[12], oc1[12], oc2[12];
    joint_transform(m, 0, q, X0);
    for (int l = 0; l < c->nc; ++l) {
        rbgi_frame_placement(c, l, 1, oX, X0 + 9, oc1);
        rbgi_frame_placement(c, l, 2, oX, X0 + 9, oc2);
        rbgi_constraint_jacobian(m, c, l, oc1, oc2, Jw, J);
    }
}

/* z_r <- L^-T z_r for the rows r of constraint l (Featherstone 2005 Table 3), over the
 * dofs i supporting it, leaves to root, L on the lower triangle of H (nv x nv):
 *   z_i <- z_i / L_ii (unless unit);   z_j <- z_j - L_ij z_i   (j in chain(lambda(i)))
 * Entries outside those dofs stay 0. */
static void back_substitute(const rbg_model *RST m, const rbg_constraints *RST c, int l,
                            const double *RST H, int unit, double *RST Z)
{
    const int nv = m->nv, *lam = m->dof_parent;
    int a = last_dof(m, c->body1[l]), b = last_dof(m, c->body2[l]);
    for (int i; (i = next_dof(lam, &a, &b)) >= 0;) {
        const double *Hi = H + (size_t)nv * i;
        for (int r = c->row[l]; r < c->row[l + 1]; ++r) {
            double *z = Z + (size_t)nv * r;
            if (!unit)
                z[i] = z[i] / Hi[i];
            for (int j = lam[i]; j >= 0; j = lam[j])
                z[j] -= Hi[j] * z[i];
        }
    }
}

/* G = Z W^T (+ diag(d) when d is not NULL), G_rs = sum_k Z_rk W_sk over the dofs k
 * supporting the constraint of row r (W_sk is 0 where k does not support row s's):
 * the lower triangle, mirrored. */
static void gram(const rbg_model *RST m, const rbg_constraints *RST c, const double *RST Z,
                 const double *RST W, const double *RST d, double *RST G)
{
    const int nv = m->nv, mr = c->m, *lam = m->dof_parent;
    for (int r = 0; r < mr; ++r)
        for (int s = 0; s <= r; ++s)
            G[(size_t)mr * r + s] = (d && r == s) ? d[r] : 0.0;
    for (int l = 0; l < c->nc; ++l) {
        int a = last_dof(m, c->body1[l]), b = last_dof(m, c->body2[l]);
        for (int k; (k = next_dof(lam, &a, &b)) >= 0;)
            for (int r = c->row[l]; r < c->row[l + 1]; ++r) {
                const double zr = Z[(size_t)nv * r + k];
                double *Gr = G + (size_t)mr * r;
                for (int s = 0; s <= r; ++s)
                    Gr[s] += zr * W[(size_t)nv * s + k];
            }
    }
    for (int r = 0; r < mr; ++r)
        for (int s = 0; s < r; ++s)
            G[(size_t)mr * s + r] = G[(size_t)mr * r + s];
}

/* In place A = C^T C (n x n, lower triangle), the reversed Cholesky of Featherstone 2005
 * Table 2 (right) on a fully connected chain:
 *   for k = n-1 .. 0:  C_kk = sqrt(A_kk);  C_ki = A_ki / C_kk;  A_ij -= C_ki C_kj  (j <= i < k) */
static int dense_ltl(int n, double *RST A)
{
    for (int k = n - 1; k >= 0; --k) {
        double *Ak = A + (size_t)n * k;
        if (!(Ak[k] > 0.0))
            return RBG_ESINGULAR;
        Ak[k] = sqrt(Ak[k]);
        const double inv = 1.0 / Ak[k];
        for (int i = 0; i < k; ++i)
            Ak[i] *= inv;
        for (int i = 0; i < k; ++i) {
            double *Ai = A + (size_t)n * i;
            for (int j = 0; j <= i; ++j)
                Ai[j] -= Ak[i] * Ak[j];
        }
    }
    return RBG_OK;
}

/* out = A^-1 = V diag(w) V^T with V = L^-1, for A = L^T diag(1/w) L (n x n, L the lower
 * triangle of rows of stride ld):  w given: L unit lower (its diagonal unread), V_ii = 1;
 * w NULL: a Cholesky factor A = L^T L, w = 1, V_ii = 1 / L_ii.  Forward substitution
 *   V_ij = -V_ii sum_{k=j}^{i-1} L_ik V_kj   (j < i),
 * then out_ij = sum_{k <= i} V_ik w_k V_jk for j >= i, mirrored.  V: n x n scratch. */
static void inverse_from_lower(int n, const double *RST L, int ld, const double *RST w,
                               double *RST V, double *RST out)
{
    for (int i = 0; i < n; ++i) {
        const double *Li = L + (size_t)ld * i;
        double *Vi = V + (size_t)n * i;
        Vi[i] = w ? 1.0 : 1.0 / Li[i];
        for (int j = 0; j < i; ++j) {
            double s = 0.0;
            for (int k = j; k < i; ++k)
                s += Li[k] * V[(size_t)n * k + j];
            Vi[j] = w ? -s : -(s * Vi[i]);
        }
    }
    for (int i = 0; i < n; ++i) {
        const double *Vi = V + (size_t)n * i;
        for (int j = i; j < n; ++j) {
            const double *Vj = V + (size_t)n * j;
            double s = 0.0;
            for (int k = 0; k <= i; ++k)
                s += (w ? Vi[k] * w[k] : Vi[k]) * Vj[k];
            out[(size_t)n * i + j] = s;
            out[(size_t)n * j + i] = s;
        }
    }
}

/* ===================================================================== */
/*  Delassus matrix J M^-1 J^T (Featherstone 2005 §5)                    */
/* ===================================================================== */

/* work: H[nv nv] crba[22 nb + 6 nv] dinv[nv] Z[m nv] ZD[m nv] */
int rbg_delassus(const rbg_model *RST m, const rbg_constraints *RST c, const double *RST q,
                 double *RST G, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m;
    double *H = work, *crba = H + (size_t)nv * nv, *dinv = crba + 22 * nb + 6 * nv;
    double *Z = dinv + nv, *ZD = Z + (size_t)mr * nv;
    if (!all_finite(q, m->nq))
        return RBG_EINPUT;
    if (!mr)
        return RBG_OK;

    /* M (lower triangle, CRBA) = L^T D L  (Table 2, left) */
    rbgi_crba_core(m, q, H, crba, 0);
    const int rc = rbgi_ltdl_inplace(m->dof_parent, nv, H);
    if (rc)
        return rc;
    for (int k = 0; k < nv; ++k)
        dinv[k] = 1.0 / H[(size_t)nv * k + k];

    /* J, then z_r = L^-T j_r in place (unit L):  J M^-1 J^T = Z D^-1 Z^T */
    jacobian(m, c, q, crba, Z);
    for (int l = 0; l < c->nc; ++l)
        back_substitute(m, c, l, H, 1, Z);
    for (int r = 0; r < mr; ++r)
        for (int k = 0; k < nv; ++k)
            ZD[(size_t)nv * r + k] = Z[(size_t)nv * r + k] * dinv[k];
    gram(m, c, Z, ZD, NULL, G);
    return RBG_OK;
}

/* ===================================================================== */
/*  LTL-OSIM (Sathya 2024 §VIII-C)                                       */
/* ===================================================================== */

/* work: H[nv nv] crba[22 nb + 6 nv] Y[m nv] A[m m] V[m m] rho[m] */
int rbg_ltl_osim(const rbg_model *RST m, const rbg_constraints *RST c, double mu,
                 const double *RST q, double *RST Lambda, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m;
    double *H = work, *crba = H + (size_t)nv * nv, *Y = crba + 22 * nb + 6 * nv;
    double *A = Y + (size_t)mr * nv, *V = A + (size_t)mr * mr, *rho = V + (size_t)mr * mr;
    if (!all_finite(q, m->nq) || bad_mu(mu))
        return RBG_EINPUT;
    if (!mr)
        return RBG_OK;
    damping(c, mu, rho);

    /* M = L^T L  (Table 2, right) */
    rbgi_crba_core(m, q, H, crba, 0);
    int rc = rbgi_ltl_inplace(m->dof_parent, nv, H);
    if (rc)
        return rc;
    /* Y = J L^-1:  y_r = L^-T j_r  (Table 3);  Lambda_mu^-1 = Y Y^T + R */
    jacobian(m, c, q, crba, Y);
    for (int l = 0; l < c->nc; ++l)
        back_substitute(m, c, l, H, 0, Y);
    gram(m, c, Y, Y, rho, A);
    /* Y Y^T + R = C^T C,  Lambda_mu = C^-1 C^-T */
    rc = dense_ltl(mr, A);
    if (rc)
        return rc;
    inverse_from_lower(mr, A, mr, NULL, V, Lambda);
    return RBG_OK;
}

/* ===================================================================== */
/*  cABA-OSIM (Sathya 2024 Alg. 5, eq. 40-41)                            */
/* ===================================================================== */

/* work: aba[RBG_WORK_ABA] (X, IA, U, Dinv used) oX[12 nb] K[6 m] KA[6 m nb] T[6 m] rho[m] */
int rbg_caba_osim(const rbg_model *RST m, const rbg_constraints *RST c, double mu,
                  const double *RST q, double *RST Lambda, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m;
    const rbgi_aba w = rbgi_aba_layout(m, work);
    double *oX = work + RBG_WORK_ABA(nb, nv), *K = oX + 12 * nb, *KA = K + 6 * mr;
    double *T = KA + (size_t)6 * mr * nb, *rho = T + 6 * mr;
    if (!all_finite(q, m->nq) || bad_mu(mu))
        return RBG_EINPUT;
    if (!c->anchored)
        return RBG_ELOOP;
    if (!mr)
        return RBG_OK;
    damping(c, mu, rho);

    /* X_i, IA_i = I_i;  oX_i (world) when a frame A is the world: its K reads c1Mc2 */
    int world = 0;
    for (int l = 0; l < c->nc; ++l)
        world |= c->body1[l] < 0;
    for (int i = 0; i < nb; ++i) {
        const int p = m->parent[i];
        joint_transform(m, i, q, w.X + 12 * i);
        if (world) {
            if (p < 0)
                memcpy(oX + 12 * i, w.X + 12 * i, 12 * sizeof(double));
            else
                compose(oX + 12 * p, w.X + 12 * i, oX + 12 * i);
        }
        rbi_matrix(m->inertia + RBG_INERTIA_STRIDE * i, w.IA + 36 * i);
    }

    /* line 4:  H_b^A = I_b + W K^T K  (a constant inertia when the frame is held by the
       world, Sathya 2024 eq. 24),  K^A = W K */
    for (int l = 0; l < c->nc; ++l) {
        const int r0 = c->row[l], bl = moving_body(c, l);
        const double W = 1.0 / rho[r0];
        double rel[12] = {0}, *Kl = K + 6 * r0, *IAb = w.IA + 36 * bl;
        if (c->body1[l] < 0) {
            const double o[3] = {0.0, 0.0, 0.0};
            double oc1[12], oc2[12];
            rbgi_frame_placement(c, l, 1, oX, o, oc1);
            rbgi_frame_placement(c, l, 2, oX, o, oc2);
            inv_compose(oc1, oc2, rel);
        }
        rbgi_constraint_K(c, l, rel, Kl);
        rbgi_add_constraint_inertia(c, l, W, Kl, IAb);
    }
    /* KA_i^T: the columns (K^A)^T of ES(i), zero but at each constraint's own body */
    for (int i = 0; i < nb; ++i)
        if (c->se[i])
            for (int a = c->es_ptr[i]; a < c->es_ptr[i + 1]; ++a) {
                const int la = c->es_idx[a];
                memset(KA + (size_t)6 * mr * i + 6 * c->row[la], 0, (size_t)6 * c->size[la] * sizeof(double));
            }
    for (int l = 0; l < c->nc; ++l) {
        double *KAb = KA + (size_t)6 * mr * moving_body(c, l);
        for (int r = c->row[l]; r < c->row[l + 1]; ++r)
            for (int k = 0; k < 6; ++k)
                KAb[6 * r + k] = K[6 * r + k] * (1.0 / rho[r]);
    }
    memset(Lambda, 0, (size_t)mr * mr * sizeof(double));

    /* lines 5-11 and 16, leaves to root:  D_i = S_i^T H_i^A S_i;  on the supporting
       bodies L_0^A += KA_i S_i D_i^-1 S_i^T KA_i^T and the columns move up through
       X_i^* P_i;  H_parent^A += X_i^* (H_i^A - U_i D_i^-1 U_i^T) X_i^-1 */
    for (int i = nb - 1; i >= 0; --i) {
        const int p = m->parent[i], free = m->jtype[i] == RBG_FREE, three = m->nvj[i] == 3;
        double *IAi = w.IA + 36 * i, *Ui = w.U + 6 * i, Ia[36];
        if (free) {
            if (ldlt_factor(IAi, 6))
                return RBG_ESINGULAR;
        } else if (three) {
            /* U_i, D_i's factor into the IA_i block; Ia = H_i^A - U_i D_i^-1 U_i^T */
            if (joint_step3(m, i, IAi, p >= 0 ? Ia : NULL))
                return RBG_ESINGULAR;
        } else {
            const double D = joint_U(m, i, IAi, Ui);
            if (!(D > 0.0))
                return RBG_ESINGULAR;
            w.Dinv[i] = 1.0 / D;
        }
        if (c->se[i])                          /* Alg. 5 lines 9-10, 16 (PV-OSIM) */
            rbgi_pv_delassus_step(m, c, i, &w, KA + (size_t)6 * mr * i, T, Lambda,
                                  p >= 0 ? KA + (size_t)6 * mr * p : NULL);
        if (p >= 0 && three) {
            inertia6_act_add(w.X + 12 * i, Ia, w.IA + 36 * p);
        } else if (p >= 0 && !free) {
            articulated_update(IAi, Ui, w.Dinv[i]);
            inertia6_act_add(w.X + 12 * i, IAi, w.IA + 36 * p);
        }
    }

    /* line 21:  Lambda_mu = W - L_0^A  (lower triangle, mirrored) */
    for (int r = 0; r < mr; ++r) {
        double *Lr = Lambda + (size_t)mr * r;
        for (int s = 0; s < r; ++s) {
            Lr[s] = -Lr[s];
            Lambda[(size_t)mr * s + r] = Lr[s];
        }
        Lr[r] = 1.0 / rho[r] - Lr[r];
    }
    return RBG_OK;
}

/* ===================================================================== */
/*  KKT-OSIM (Carpentier 2021 Alg. 1, eq. 24, §IV-E)                     */
/* ===================================================================== */

/* work: H[N N] dinv[N] M[nv nv] J[m nv] crba[22 nb + 6 nv] rho[m] V[m m]  (N = m + nv) */
int rbg_kkt_osim(const rbg_model *RST m, const rbg_constraints *RST c, double mu,
                 const double *RST q, double *RST Lambda, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m, N = mr + nv;
    double *H = work, *dinv = H + (size_t)N * N, *M = dinv + N, *J = M + (size_t)nv * nv;
    double *crba = J + (size_t)mr * nv, *rho = crba + 22 * nb + 6 * nv, *V = rho + mr;
    if (!all_finite(q, m->nq) || bad_mu(mu))
        return RBG_EINPUT;
    if (!mr)
        return RBG_OK;
    damping(c, mu, rho);

    /* M (lower triangle, CRBA) and J */
    rbgi_crba_core(m, q, M, crba, 0);
    jacobian(m, c, q, crba, J);
    /* K_mu = [[-R, J], [J^T, M]] on its pattern (the constraint block cleared: the
       inverse below reads all of it) */
    for (int k = 0; k < N; ++k) {
        double *Hk = H + (size_t)N * k;
        if (k < mr)
            memset(Hk, 0, (size_t)mr * sizeof(double));
        Hk[k] = k < mr ? -rho[k] : M[(size_t)nv * (k - mr) + (k - mr)];
        for (int e = c->kkt_ptr[k]; e < c->kkt_ptr[k + 1]; ++e) {
            const int i = c->kkt_idx[e];
            Hk[i] = k < mr ? 0.0 : i >= mr ? M[(size_t)nv * (k - mr) + (i - mr)] : J[(size_t)nv * i + (k - mr)];
        }
    }
    /* K_mu = L^T D L, joints leaves to root then the constraint rows (Alg. 1): the
       constraint block holds -Lambda_mu^-1 = Lc^T Dc Lc (eq. 24) */
    const int rc = rbgi_ldl_factor(N, c->kkt_ptr, c->kkt_idx, mr, H, dinv);
    if (rc)
        return rc;
    /* Lambda_mu = Lc^-1 (-Dc)^-1 Lc^-T */
    for (int r = 0; r < mr; ++r)
        dinv[r] = -dinv[r];
    inverse_from_lower(mr, H, N, dinv, V, Lambda);
    return RBG_OK;
}
