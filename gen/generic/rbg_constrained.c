/*
 * rbg_constrained.c -- generic C for kinematic constraints and the four proximal
 * constrained-dynamics solvers (see rbg.h, section "Constraints"), the robot and the
 * constraint set passed as data.  Counterparts of rbdgen's gen/algorithms/prox_ltl.py,
 * prox_ltls.py, constrained_aba.py and prox_pv.py: same iterates, same outputs.
 *
 * References: J. Carpentier, R. Budhiraja, N. Mansard, Proximal and Sparse Resolution of
 * Constrained Dynamic Equations, RSS 2021 (eq. 18, Alg. 1);  A. Sathya, J. Carpentier,
 * Constrained Articulated Body Dynamics Algorithms, 2024 (eq. 16, 24, 27b, 29, 38,
 * Alg. 1-4);  R. Featherstone, Efficient Factorization of the Joint-Space Inertia
 * Matrix for Branched Kinematic Trees, IJRR 2005 (Table 2, §5).
 *
 * Notation: rho = mu / weight per row (Pinocchio's damping), w = 1 / rho (Sathya's
 * penalty); c1Mc2 = (R12, p12) the placement of frame B in frame A; K (size x 6) maps
 * the LOCAL spatial motion of a constrained body to the constraint rows (Sathya 2024
 * eq. 20c), k the desired value of K a_body, a_body including the gravity offset -g.
 */
#include "rbg_internal.h"

/* ===================================================================== */
/*  Constraint set: checks and structure (rbg_constraints_init)          */
/* ===================================================================== */

/* 1 if body a is an ancestor of body b or b itself (b may be -1). */
static int supports(const rbg_model *RST m, int a, int b)
{
    for (; b >= 0; b = m->parent[b])
        if (b == a)
            return 1;
    return 0;
}

static int rows_of(const rbg_constraints *RST c)
{
    int n = 0;
    for (int l = 0; l < c->nc; ++l) {
        if (c->size[l] != 3 && c->size[l] != 6)
            return -1;
        n += c->size[l];
    }
    return n;
}

size_t rbg_constraints_iwork_size(const rbg_model *m, const rbg_constraints *c)
{
    const int mr = rows_of(c);
    if (mr < 0)
        return 0;
    const size_t nb = (size_t)m->nbodies, nv = (size_t)m->nv, nc = (size_t)c->nc;
    const size_t M = (size_t)mr, N = M + nv;
    /* row, sup, se, es, kkt, mmu, del, lcp order and pattern (upper bounds), then N x N
       flags for the symbolic factorisation */
    return (nc + 1) + (nc + 1 + nc * nv) + nb + (nb + 1 + nb * nc) + (N + 1 + N * (N - 1) / 2)
           + (nv + 1 + nv * (nv > 0 ? nv - 1 : 0) / 2) + (M + 1 + M * (M > 0 ? M - 1 : 0) / 2)
           + M + (N + 1 + N * (N - 1) / 2) + N * N;
}

/* Symbolic L^T D L (elimination from the last row to the first, Featherstone 2005 §4):
 * F (n x n, F[k n + i] = 1 if A_ki != 0, i < k) gets its fill-in, then each row is
 * written descending into (ptr, idx); returns the next free int. */
static int *symbolic_ldl(int n, int *RST F, int *RST ptr, int *RST idx)
{
    for (int k = n - 1; k >= 0; --k)
        for (int i = k - 1; i >= 0; --i)
            if (F[(size_t)n * k + i])
                for (int j = i - 1; j >= 0; --j)
                    if (F[(size_t)n * k + j])
                        F[(size_t)n * i + j] = 1;
    int e = 0;
    for (int k = 0; k < n; ++k) {
        ptr[k] = e;
        for (int i = k - 1; i >= 0; --i)
            if (F[(size_t)n * k + i])
                idx[e++] = i;
    }
    ptr[n] = e;
    return idx + e;
}

/* F (N x N, N = m + nv) = the structure of K_mu below the diagonal, constraint row order[i]
 * at index i (order NULL: row i), joint d at m + d: each joint row holds the ancestor dofs
 * and the rows of the constraints the joint supports (Carpentier 2021 eq. 26-27). */
static void kkt_structure(const rbg_model *RST m, const int *RST row,
                          const int *RST sup_ptr, const int *RST sup_idx, int mr, const int *RST order,
                          int *RST F)
{
    const int nv = m->nv, N = mr + nv;
    memset(F, 0, (size_t)N * (size_t)N * sizeof(int));
    for (int d = 0; d < nv; ++d)
        for (int a = m->dof_parent[d]; a >= 0; a = m->dof_parent[a])
            F[(size_t)N * (mr + d) + mr + a] = 1;
    for (int i = 0; i < mr; ++i) {
        const int r = order ? order[i] : i;
        int l = 0;
        while (r >= row[l + 1])
            ++l;
        for (int s = sup_ptr[l]; s < sup_ptr[l + 1]; ++s)
            F[(size_t)N * (mr + sup_idx[s]) + i] = 1;
    }
}

int rbg_constraints_init(const rbg_model *m, rbg_constraints *c, int *iwork)
{
    const int nb = m->nbodies, nv = m->nv, nc = c->nc, mr = rows_of(c);
    if (nc < 0 || mr < 0)
        return RBG_EMODEL;
    for (int l = 0; l < nc; ++l) {
        const int b1 = c->body1[l], b2 = c->body2[l];
        if (b1 < -1 || b1 >= nb || b2 < -1 || b2 >= nb || b1 == b2)
            return RBG_EMODEL;
        if (c->unilateral && c->unilateral[l] != 0 && c->unilateral[l] != 1)
            return RBG_EMODEL;
        if (!(c->kp[l] >= 0.0) || !(c->kd[l] >= 0.0) || !isfinite(c->kp[l]) || !isfinite(c->kd[l]))
            return RBG_EMODEL;
        if (!(c->weight[l] > 0.0) || !isfinite(c->weight[l]) || !all_finite(c->M1 + 12 * l, 12)
            || !all_finite(c->M2 + 12 * l, 12))
            return RBG_EMODEL;
    }
    const int N = mr + nv;
    int *row = iwork, *sup_ptr = row + nc + 1, *sup_idx = sup_ptr + nc + 1;
    int *p = sup_idx;
    c->m = mr;
    c->anchored = 1;
    c->nu = 0;

    /* rows: constraint l owns rows row[l] .. row[l+1]-1 */
    row[0] = 0;
    for (int l = 0; l < nc; ++l) {
        row[l + 1] = row[l] + c->size[l];
        if (c->body1[l] >= 0 && c->body2[l] >= 0)
            c->anchored = 0;
        if (c->unilateral && c->unilateral[l])
            c->nu++;
    }

    /* supports sigma_l (Carpentier 2021 eq. 25): dofs of the joints supporting a moving
       frame; a 6D loop's frames move together under their common ancestors */
    for (int l = 0; l < nc; ++l) {
        const int b1 = c->body1[l], b2 = c->body2[l];
        const int loop6 = c->size[l] == 6 && b1 >= 0 && b2 >= 0;
        sup_ptr[l] = (int)(p - sup_idx);
        for (int i = 0; i < nb; ++i) {
            const int s1 = supports(m, i, b1), s2 = supports(m, i, b2);
            if (loop6 ? s1 != s2 : (s1 || s2))
                for (int k = 0; k < m->nvj[i]; ++k)
                    *p++ = m->idx_v[i] + k;
        }
    }
    sup_ptr[nc] = (int)(p - sup_idx);

    /* S_E: bodies supporting a constraint;  ES(i): constraints in the subtree of i */
    int *se = p, *es_ptr = se + nb, *es_idx = es_ptr + nb + 1;
    p = es_idx;
    for (int i = 0; i < nb; ++i) {
        es_ptr[i] = (int)(p - es_idx);
        se[i] = 0;
        for (int l = 0; l < nc; ++l)
            if (supports(m, i, c->body1[l]) || supports(m, i, c->body2[l])) {
                *p++ = l;
                se[i] = 1;
            }
    }
    es_ptr[nb] = (int)(p - es_idx);

    /* K_mu with constraint rows first: joint rows m + d hold the tree (ancestor dofs)
       and the rows of the constraints supported by d (Carpentier 2021 eq. 26-27) */
    int *kkt_ptr = p, *kkt_idx = kkt_ptr + N + 1;
    int *F = iwork + rbg_constraints_iwork_size(m, c) - (size_t)N * (size_t)N;
    kkt_structure(m, row, sup_ptr, sup_idx, mr, NULL, F);
    p = symbolic_ldl(N, F, kkt_ptr, kkt_idx);

    /* M_mu: the tree, plus J_l^T J_l / rho on the support of every constraint whose
       inertia term is not constant (loops) */
    int *mmu_ptr = p, *mmu_idx = mmu_ptr + nv + 1;
    memset(F, 0, (size_t)nv * (size_t)nv * sizeof(int));
    for (int d = 0; d < nv; ++d)
        for (int a = m->dof_parent[d]; a >= 0; a = m->dof_parent[a])
            F[(size_t)nv * d + a] = 1;
    for (int l = 0; l < nc; ++l)
        if (!constant_inertia(c, l))
            for (int s = sup_ptr[l]; s < sup_ptr[l + 1]; ++s)
                for (int t = sup_ptr[l]; t < s; ++t)
                    F[(size_t)nv * sup_idx[s] + sup_idx[t]] = 1;
    p = symbolic_ldl(nv, F, mmu_ptr, mmu_idx);

    /* the damped Delassus matrix: dense */
    int *del_ptr = p, *del_idx = del_ptr + mr + 1;
    for (int k = 0; k < mr; ++k)
        for (int i = 0; i < k; ++i)
            F[(size_t)mr * k + i] = 1;
    p = symbolic_ldl(mr, F, del_ptr, del_idx);

    /* rbg_prox_lcp's K_mu: the unilateral rows (the normals, row[l] + 2) first, then the
       others, ascending (gen/algorithms/prox_lcp.py) */
    int *lcp_order = p, *lcp_ptr = lcp_order + mr, *lcp_idx = lcp_ptr + N + 1, ku = 0, kb = c->nu;
    for (int l = 0; l < nc; ++l)
        for (int r = row[l]; r < row[l + 1]; ++r) {
            if (c->unilateral && c->unilateral[l] && r == row[l] + 2)
                lcp_order[ku++] = r;
            else
                lcp_order[kb++] = r;
        }
    kkt_structure(m, row, sup_ptr, sup_idx, mr, lcp_order, F);
    symbolic_ldl(N, F, lcp_ptr, lcp_idx);

    c->row = row;
    c->sup_ptr = sup_ptr;
    c->sup_idx = sup_idx;
    c->se = se;
    c->es_ptr = es_ptr;
    c->es_idx = es_idx;
    c->kkt_ptr = kkt_ptr;
    c->kkt_idx = kkt_idx;
    c->mmu_ptr = mmu_ptr;
    c->mmu_idx = mmu_idx;
    c->del_ptr = del_ptr;
    c->del_idx = del_idx;
    c->lcp_order = lcp_order;
    c->lcp_ptr = lcp_ptr;
    c->lcp_idx = lcp_idx;
    return RBG_OK;
}

size_t rbg_constrained_work_size(const rbg_model *m, const rbg_constraints *c, rbg_algo algo)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m;
    switch (algo) {
    case RBG_ALGO_PROX_LTL: return RBG_WORK_PROX_LTL(nb, nv, mr);
    case RBG_ALGO_PROX_LTLS: return RBG_WORK_PROX_LTLS(nb, nv, mr);
    case RBG_ALGO_CONSTRAINED_ABA: return RBG_WORK_CONSTRAINED_ABA(nb, nv, mr);
    case RBG_ALGO_PROX_PV: return RBG_WORK_PROX_PV(nb, nv, mr);
    case RBG_ALGO_DELASSUS: return RBG_WORK_DELASSUS(nb, nv, mr);
    case RBG_ALGO_LTL_OSIM: return RBG_WORK_LTL_OSIM(nb, nv, mr);
    case RBG_ALGO_CABA_OSIM: return RBG_WORK_CABA_OSIM(nb, nv, mr);
    case RBG_ALGO_KKT_OSIM: return RBG_WORK_KKT_OSIM(nb, nv, mr);
    case RBG_ALGO_PROX_LCP: return RBG_WORK_PROX_LCP(nb, nv, mr);
    case RBG_ALGO_IMPULSE: return RBG_WORK_IMPULSE(nb, nv, mr);
    default: return 0;
    }
}

/* ===================================================================== */
/*  Sparse L^T D L on a pattern (Featherstone 2005 Table 2, Carpentier   */
/*  2021 Alg. 1), matrices stored dense row-major, lower triangle used   */
/* ===================================================================== */

/* In place H = L^T D L over (ptr, idx):
 *   for k = n-1 .. 0, for i in row k (descending):
 *       a = H_ki / H_kk;  H_ii -= a H_ki;  H_ij -= a H_kj (j after i in row k);  H_ki = a
 * Rows k < nneg must end with a negative pivot (the -rho block of K_mu), the others with a
 * positive one, else RBG_ESINGULAR.  dinv[k] = 1 / D_k. */
int rbgi_ldl_factor(int n, const int *RST ptr, const int *RST idx, int nneg, double *RST H,
                    double *RST dinv)
{
    for (int k = n - 1; k >= 0; --k) {
        double *Hk = H + (size_t)n * k;
        const double d = Hk[k];
        if (k < nneg ? !(d < 0.0) : !(d > 0.0))
            return RBG_ESINGULAR;
        dinv[k] = 1.0 / d;
        for (int e = ptr[k]; e < ptr[k + 1]; ++e) {
            const int i = idx[e];
            double *Hi = H + (size_t)n * i;
            const double a = Hk[i] * dinv[k];
            Hi[i] -= a * Hk[i];
            for (int f = e + 1; f < ptr[k + 1]; ++f)
                Hi[idx[f]] -= a * Hk[idx[f]];
            Hk[i] = a;
        }
    }
    return RBG_OK;
}

/* x <- D^-1 L^-T x on the rows below n (Featherstone 2005 §5, first half), the
 * right-hand side's rows from n on taken as zero (L^-T carries values to lower rows only):
 *   L^T y = x  rows n-1 .. 0:  y_j -= L_ij y_i  (j in row i);   y_i *= 1 / D_i
 * H: the factor, rows of `stride` doubles. */
void rbgi_ldl_backward(int n, int stride, const int *RST ptr, const int *RST idx, const double *RST H,
                       const double *RST dinv, double *RST x)
{
    for (int i = n - 1; i >= 0; --i) {
        const double *Hi = H + (size_t)stride * i;
        for (int e = ptr[i]; e < ptr[i + 1]; ++e)
            x[idx[e]] -= Hi[idx[e]] * x[i];
    }
    for (int i = 0; i < n; ++i)
        x[i] *= dinv[i];
}

/* x <- L^-1 x on rows from .. to-1, rows below `from` already solved (second half):
 *   L x = y    rows from .. to-1:  x_i = y_i - sum_{j in row i} L_ij x_j */
void rbgi_ldl_forward(int from, int to, int stride, const int *RST ptr, const int *RST idx,
                      const double *RST H, double *RST x)
{
    for (int i = from; i < to; ++i) {
        const double *Hi = H + (size_t)stride * i;
        double s = x[i];
        for (int e = ptr[i]; e < ptr[i + 1]; ++e)
            s -= Hi[idx[e]] * x[idx[e]];
        x[i] = s;
    }
}

/* x <- H^-1 x = L^-1 D^-1 L^-T x */
static void ldl_solve(int n, const int *RST ptr, const int *RST idx, const double *RST H,
                      const double *RST dinv, double *RST x)
{
    rbgi_ldl_backward(n, n, ptr, idx, H, dinv, x);
    rbgi_ldl_forward(0, n, n, ptr, idx, H, x);
}

/* ===================================================================== */
/*  Constraint kinematics (gen/constraints.py, LOCAL frames)             */
/* ===================================================================== */

/* oMc of side s (1 or 2) of constraint l: oX_body M_s, or M_s for the world, in a
 * frame with the world's axes at the world point o (oX given in that frame). */
void rbgi_frame_placement(const rbg_constraints *RST c, int l, int s, const double *RST oX,
                          const double *RST o, double *RST out)
{
    const int b = s == 1 ? c->body1[l] : c->body2[l];
    const double *Ms = (s == 1 ? c->M1 : c->M2) + 12 * l;
    if (b >= 0) {
        compose(oX + 12 * b, Ms, out);
        return;
    }
    memcpy(out, Ms, 12 * sizeof(double));
    for (int k = 0; k < 3; ++k)
        out[9 + k] -= o[k];
}

/* Whether c1Mc2 is needed: a moving frame B, or the position feedback kp. */
static int needs_rel(const rbg_constraints *RST c, int l)
{
    return c->body2[l] >= 0 || c->kp[l] != 0.0;
}

/* Twist [v; w] with exp6([v; w]) = (R, p) (Pinocchio's log6; Taylor branches below
 * theta = 1e-4 as in gen/constraints.py):
 *   w = theta / sin(theta) * vee(R - R^T) / 2,  v = p - w x p / 2 + alpha w x (w x p),
 *   alpha = (1 - theta sin(theta) / (2 (1 - cos(theta)))) / theta^2 */
static void log6(const double *RST X, double *RST out)
{
    const double *R = X, *p = X + 9;
    const double s3[3] = {0.5 * (R[7] - R[5]), 0.5 * (R[2] - R[6]), 0.5 * (R[3] - R[1])};
    const double s = sqrt(dot3(s3, s3)), co = 0.5 * (R[0] + R[4] + R[8] - 1.0);
    const double theta = atan2(s, co), t2 = theta * theta;
    const int small = theta < 1e-4;
    const double ratio = small ? 1.0 + t2 / 6.0 : theta / fmax(s, 1e-300);
    const double alpha = small ? 1.0 / 12.0 + t2 / 720.0
                               : (1.0 - theta * s / fmax(2.0 * (1.0 - co), 1e-300)) / fmax(t2, 1e-300);
    double *v = out, *w = out + 3, wp[3], wwp[3];
    for (int k = 0; k < 3; ++k)
        w[k] = ratio * s3[k];
    cross3(w, p, wp);
    cross3(w, wp, wwp);
    for (int k = 0; k < 3; ++k)
        v[k] = p[k] - 0.5 * wp[k] + alpha * wwp[k];
}

/* Right-hand sides of constraint l from the body velocities vel (and, for astar, the
 * drift accelerations acc at ddq = 0 without gravity), frames A, B in their bodies:
 *   3D:  J v = lin(v1) - R12 lin(v2),
 *        gamma = (lin(a1) + w1 x lin(v1)) - R12 (lin(a2) + w2 x lin(v2)),  e = -p12
 *   6D:  J v = v1 - c1Xc2 v2,
 *        gamma = a1 - c1Xc2 a2 + (v1 - c1Xc2 v2) x (c1Xc2 v2),  e = -log6(c1Mc2)
 *   rest = -gamma_x - Kd J v - Kp e   (gamma_x: the part of gamma not of the form K a_body)
 *   astar = a_c* = rest - gamma_K = -gamma - Kd J v - Kp e   (Carpentier 2021 eq. 3b)
 * rel = c1Mc2 is read only when needs_rel. */
static void constraint_rhs(const rbg_constraints *RST c, int l, const double *RST rel,
                           const double *RST vel, const double *RST acc, double *RST rest,
                           double *RST astar)
{
    const int n = c->size[l], b1 = c->body1[l], b2 = c->body2[l];
    double jv[6] = {0}, gx[6] = {0}, gk[6] = {0};
    if (b1 >= 0) {                       /* frame A: v1 = M1^-1 v_b1, a1 = M1^-1 a_b1 */
        const double *F1 = c->M1 + 12 * l;
        double v1[6], a1[6];
        inv_motion(F1, vel + 6 * b1, v1);
        memcpy(jv, v1, (size_t)n * sizeof(double));
        if (n == 3)
            cross3(v1 + 3, v1, gx);
        if (acc) {
            inv_motion(F1, acc + 6 * b1, a1);
            memcpy(gk, a1, (size_t)n * sizeof(double));
        }
    }
    if (b2 >= 0) {                       /* frame B, seen in frame A through c1Mc2 */
        const double *F2 = c->M2 + 12 * l;
        double v2[6], a2[6], t[6], u[6];
        inv_motion(F2, vel + 6 * b2, v2);
        if (n == 3) {
            mv3(rel, v2, t);
            cross3(v2 + 3, v2, u);
            mv3(rel, u, u + 3);
            for (int k = 0; k < 3; ++k) {
                jv[k] -= t[k];
                gx[k] -= u[3 + k];
            }
        } else {
            act_motion(rel, v2, t);
            for (int k = 0; k < 6; ++k)
                jv[k] -= t[k];
            if (b1 >= 0)
                cross_motion(jv, t, gx);
        }
        if (acc) {
            inv_motion(F2, acc + 6 * b2, a2);
            if (n == 3)
                mv3(rel, a2, u);
            else
                act_motion(rel, a2, u);
            for (int k = 0; k < n; ++k)
                gk[k] -= u[k];
        }
    }
    double e[6] = {0};
    if (c->kp[l] != 0.0) {
        if (n == 3)
            for (int k = 0; k < 3; ++k)
                e[k] = -rel[9 + k];
        else {
            log6(rel, e);
            for (int k = 0; k < 6; ++k)
                e[k] = -e[k];
        }
    }
    for (int k = 0; k < n; ++k) {
        rest[k] = -gx[k] - c->kd[l] * jv[k] - c->kp[l] * e[k];
        if (astar)
            astar[k] = rest[k] - gk[k];
    }
}

/* Rows of J (row-major m x nv, zero elsewhere) for constraint l from the world motion
 * subspaces Jw_d = (v_d, w_d) of the dofs supporting its frames, oc1 = oMc1, oc2 = oMc2:
 *   3D:  J_d = oR1^T [ (v_d + w_d x op1) [d supports A] - (v_d + w_d x op2) [d supports B] ]
 *   6D:  J_d = c1Xo Jw_d ([d supports A] - [d supports B])
 * (the LOCAL Jacobian of Pinocchio's RigidConstraintModel; a 6D loop's common ancestors
 * cancel exactly). */
void rbgi_constraint_jacobian(const rbg_model *RST m, const rbg_constraints *RST c, int l,
                              const double *RST oc1, const double *RST oc2,
                              const double *RST Jw, double *RST J)
{
    const int n = c->size[l], nv = m->nv;
    double *Jl = J + (size_t)nv * c->row[l];
    memset(Jl, 0, (size_t)n * (size_t)nv * sizeof(double));
    for (int s = 1; s <= 2; ++s) {
        const double sign = s == 1 ? 1.0 : -1.0;
        const double *o = (s == 1 || n == 6) ? oc1 + 9 : oc2 + 9;
        for (int b = s == 1 ? c->body1[l] : c->body2[l]; b >= 0; b = m->parent[b])
            for (int k = 0; k < m->nvj[b]; ++k) {
                const int d = m->idx_v[b] + k;
                const double *Jd = Jw + 6 * d;
                double t[3], col[6];
                cross3(Jd + 3, o, t);
                for (int j = 0; j < 3; ++j)
                    t[j] += Jd[j];
                mtv3(oc1, t, col);
                mtv3(oc1, Jd + 3, col + 3);
                for (int r = 0; r < n; ++r)
                    Jl[(size_t)nv * r + d] += sign * col[r];
            }
    }
}

/* Forward kinematics for the constraints: per body X_i, v_i, c_i and the drift
 * accelerations a_i = X_i^-1 a_parent + c_i (ddq = 0, no gravity). */
static void drift_kinematics(const rbg_model *RST m, const double *RST q, const double *RST v,
                             double *RST X, double *RST vel, double *RST cc, double *RST acc)
{
    rbgi_forward_velocities(m, q, v, X, vel, cc);
    for (int i = 0; i < m->nbodies; ++i) {
        const int p = m->parent[i];
        if (p < 0) {
            memcpy(acc + 6 * i, cc + 6 * i, 6 * sizeof(double));
        } else {
            inv_motion(X + 12 * i, acc + 6 * p, acc + 6 * i);
            for (int k = 0; k < 6; ++k)
                acc[6 * i + k] += cc[6 * i + k];
        }
    }
}

/* Placements oX_i and dof subspaces Jw = oX_i S_i from the local X_i, in the frame
 * with the world's axes at body 0's origin (as rbgi_crba_core leaves them). */
static void world_kinematics(const rbg_model *RST m, const double *RST X, double *RST oX,
                             double *RST Jw)
{
    double o[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < m->nbodies; ++i) {
        world_placement(m, i, X + 12 * i, oX, o);
        world_subspace(m, i, oX + 12 * i, Jw + 6 * m->idx_v[i]);
    }
}

/* J (m x nv) and a_c* (m) of the whole set, for the joint-space solvers, from the
 * drift kinematics (X, vel, acc) and oX, Jw in the world's axes at body 0's origin
 * (the translation of X_0, body 0 being a root). */
static void joint_space_constraints(const rbg_model *RST m, const rbg_constraints *RST c,
                                    const double *RST X, const double *RST vel,
                                    const double *RST acc, const double *RST oX,
                                    const double *RST Jw, double *RST J, double *RST astar)
{
    for (int l = 0; l < c->nc; ++l) {
        double oc1[12], oc2[12], rel[12] = {0}, rest[6];
        rbgi_frame_placement(c, l, 1, oX, X + 9, oc1);
        rbgi_frame_placement(c, l, 2, oX, X + 9, oc2);
        if (needs_rel(c, l))
            inv_compose(oc1, oc2, rel);
        constraint_rhs(c, l, rel, vel, acc, rest, astar + c->row[l]);
        rbgi_constraint_jacobian(m, c, l, oc1, oc2, Jw, J);
    }
}

/* The lower triangle of M(q) by CRBA in LOCAL frames (RBDA Table 6.2):
 *   Ic_i = I_i;   Ic_parent += X_i^* Ic_i X_i^-1            (leaves to root)
 *   F = Ic_i S_i e_k;  M_r,(dofs of i) = S_i^T F;  then up the support of i:
 *   F <- X_j^* F,  j <- parent(j):  M_r,(dofs of j) = S_j^T F      (r = the dof of e_k)
 * proxLTLs' inertias carry the constraint terms 1/rho (~1e4 .. 1e6) at the frames; in
 * local frames they only meet lever arms between joints, where world coordinates would
 * cancel terms of size |p|^2 / rho and lose as many digits.  Ic: 10 nb doubles. */
static void local_crba(const rbg_model *RST m, const double *RST inertia, const double *RST X,
                       double *RST M, double *RST Ic)
{
    const int nb = m->nbodies, nv = m->nv;
    memcpy(Ic, inertia, (size_t)RBG_INERTIA_STRIDE * nb * sizeof(double));
    for (int i = nb - 1; i >= 0; --i)
        if (m->parent[i] >= 0)
            rbi_act_add(X + 12 * i, Ic + 10 * i, Ic + 10 * m->parent[i]);
    for (int i = 0; i < nb; ++i)
        for (int k = 0; k < m->nvj[i]; ++k) {
            const int r = m->idx_v[i] + k;
            double *Mr = M + (size_t)nv * r, s[6] = {0}, F[6], Fs[6];
            S_col(m, i, k, s);
            rbi_apply(Ic + 10 * i, s, F);
            S_dot(m, i, F, Fs);
            for (int e = 0; e <= k; ++e)
                Mr[m->idx_v[i] + e] = Fs[e];
            for (int j = i; m->parent[j] >= 0; j = m->parent[j]) {
                const int pj = m->parent[j];
                double t[6];
                act_force(X + 12 * j, F, t);
                memcpy(F, t, sizeof t);
                S_dot(m, pj, F, Fs);
                for (int e = 0; e < m->nvj[pj]; ++e)
                    Mr[m->idx_v[pj] + e] = Fs[e];
            }
        }
}

/* K of constraint l (n x 6, row-major) on the LOCAL motion of its moving body
 * (gen/constraints.py _terms), with c1Xb = [[R^T, -R^T [p]x], [0, R^T]] the motion
 * matrix of M1^-1 (rows r < 3: (R e_r, p x R e_r); rows 3 + r: (0, R e_r)):
 *   frame A moving (body1):  K = c1Xb, its first n rows;
 *   frame A fixed (body2 moves):  K = -R12 [c2Xb]_(0..2) (3D),  K = -c1Xc2 c2Xb (6D). */
void rbgi_constraint_K(const rbg_constraints *RST c, int l, const double *RST rel, double *RST K)
{
    const int n = c->size[l], side1 = c->body1[l] >= 0;
    const double *F = (side1 ? c->M1 : c->M2) + 12 * l, *R = F, *p = F + 9;
    double B[36] = {0};                  /* motion matrix of F^-1: [[R^T, -R^T [p]], [0, R^T]] */
    for (int r = 0; r < 3; ++r) {
        const double e[3] = {R[r], R[3 + r], R[6 + r]};
        double pe[3];
        cross3(p, e, pe);
        for (int k = 0; k < 3; ++k) {
            B[6 * r + k] = e[k];
            B[6 * r + 3 + k] = pe[k];
            B[6 * (3 + r) + 3 + k] = e[k];
        }
    }
    if (side1) {
        memcpy(K, B, (size_t)n * 6 * sizeof(double));
        return;
    }
    for (int col = 0; col < 6; ++col) {
        const double bc[6] = {B[col], B[6 + col], B[12 + col], B[18 + col], B[24 + col], B[30 + col]};
        double t[6];
        if (n == 3)
            mv3(rel, bc, t);
        else
            act_motion(rel, bc, t);
        for (int r = 0; r < n; ++r)
            K[6 * r + col] = -t[r];
    }
}

/* w K^T K of constraint l as a rigid-body inertia (10 parameters) when constant
 * (Sathya 2024 eq. 24): a point mass w at the frame origin p, plus the rotational
 * inertia w 1 for 6D:  (w, w p, w (|p|^2 1 - p p^T) [+ w 1]). */
void rbgi_constraint_inertia(const rbg_constraints *RST c, int l, double w, double *RST I10)
{
    const int side1 = c->body1[l] >= 0;
    const double *p = (side1 ? c->M1 : c->M2) + 12 * l + 9;
    const double rot = (side1 && c->size[l] == 6) ? w : 0.0;
    I10[0] = w;
    I10[1] = w * p[0];
    I10[2] = w * p[1];
    I10[3] = w * p[2];
    I10[4] = w * (p[1] * p[1] + p[2] * p[2]) + rot;
    I10[5] = -w * p[0] * p[1];
    I10[6] = -w * p[0] * p[2];
    I10[7] = w * (p[0] * p[0] + p[2] * p[2]) + rot;
    I10[8] = -w * p[1] * p[2];
    I10[9] = w * (p[0] * p[0] + p[1] * p[1]) + rot;
}

/* ===================================================================== */
/*  proxLTL (Carpentier 2021 eq. 18, Alg. 1)                             */
/* ===================================================================== */

/* M(q) (lower triangle, CRBA), b(q, v) = rnea(q, v, 0), J (LOCAL frames) and
 * a_c* = -gamma - Kd J v - Kp e.  crba: 22 nb + 6 nv doubles, kin: 30 nb. */
void rbgi_kkt_terms(const rbg_model *RST m, const rbg_constraints *RST c, const double *RST q,
                    const double *RST v, double *RST M, double *RST b, double *RST J, double *RST astar,
                    double *RST crba, double *RST kin)
{
    const int nb = m->nbodies, nv = m->nv;
    memset(M, 0, (size_t)nv * nv * sizeof(double));
    rbgi_crba_core(m, q, M, crba, 0);
    rbgi_rnea_core(m, q, v, NULL, b, kin);
    drift_kinematics(m, q, v, kin, kin + 12 * nb, kin + 18 * nb, kin + 24 * nb);
    joint_space_constraints(m, c, kin, kin + 12 * nb, kin + 24 * nb, crba, crba + 22 * nb, J, astar);
}

/* K_mu = [[-rho, J], [J^T, M]] on the pattern (ptr, idx) with constraint row order[i] at
 * index i (order NULL: row i), joint d at m + d:  H_ii = -rho_order[i],
 * H_(m+d)(m+a) = M_da,  H_(m+d) i = J_order[i] d  (fill-in positions start at 0). */
void rbgi_kkt_assemble(const rbg_model *RST m, const rbg_constraints *RST c, const int *RST ptr,
                       const int *RST idx, const int *RST order, const double *RST rho,
                       const double *RST M, const double *RST J, double *RST H)
{
    const int nv = m->nv, mr = c->m, N = mr + nv;
    for (int k = 0; k < N; ++k) {
        double *Hk = H + (size_t)N * k;
        Hk[k] = k < mr ? -rho[order ? order[k] : k] : M[(size_t)nv * (k - mr) + (k - mr)];
        for (int e = ptr[k]; e < ptr[k + 1]; ++e) {
            const int i = idx[e];
            Hk[i] = k < mr ? 0.0
                    : i >= mr ? M[(size_t)nv * (k - mr) + (i - mr)]
                              : J[(size_t)nv * (order ? order[i] : i) + (k - mr)];
        }
    }
}

/* work: H[N N] dinv[N] y[N] M[nv nv] b[nv] J[m nv] crba[22 nb + 6 nv] kin[30 nb]
 *       astar[m] rho[m] lam[m]   (N = m + nv) */
int rbg_prox_ltl(const rbg_model *RST m, const rbg_constraints *RST c,
                 const rbg_prox_options *RST opt, const double *RST q, const double *RST v,
                 const double *RST tau, double *RST ddq, double *RST lam,
                 double *RST iterations, double *RST residual, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m, N = mr + nv;
    double *H = work, *dinv = H + (size_t)N * N, *y = dinv + N, *M = y + N;
    double *b = M + (size_t)nv * nv, *J = b + nv, *crba = J + (size_t)mr * nv;
    double *kin = crba + 22 * nb + 6 * nv, *astar = kin + 30 * nb, *rho = astar + mr;
    double *lprev = rho + mr;
    if (!all_finite(q, m->nq) || !all_finite(v, nv) || !all_finite(tau, nv) || bad_options(opt))
        return RBG_EINPUT;
    if (c->nu)
        return RBG_EUNILATERAL;

    /* M, b, J and a_c*;  K_mu on its pattern */
    rbgi_kkt_terms(m, c, q, v, M, b, J, astar, crba, kin);
    damping(c, opt->mu, rho);
    rbgi_kkt_assemble(m, c, c->kkt_ptr, c->kkt_idx, NULL, rho, M, J, H);
    /* K_mu = L^T D L, joints leaves-to-root, then the constraints (Alg. 1) */
    const int rc = rbgi_ldl_factor(N, c->kkt_ptr, c->kkt_idx, mr, H, dinv);
    if (rc)
        return rc;

    /* K_mu [x; ddq_k] = [a_c* + rho lam_{k-1}; tau - b],  lam_k = -x,
       r_k = J ddq_k - a_c* = rho (lam_{k-1} - lam_k)  (eq. 18, Pinocchio's sign) */
    memset(lam, 0, (size_t)mr * sizeof(double));
    int k = 0;
    double res = 0.0;
    for (;;) {
        for (int r = 0; r < mr; ++r)
            y[r] = astar[r] + rho[r] * lam[r];
        for (int d = 0; d < nv; ++d)
            y[mr + d] = tau[d] - b[d];
        ldl_solve(N, c->kkt_ptr, c->kkt_idx, H, dinv, y);
        memcpy(ddq, y + mr, (size_t)nv * sizeof(double));
        if (!mr)
            break;
        memcpy(lprev, lam, (size_t)mr * sizeof(double));
        for (int r = 0; r < mr; ++r) {
            lam[r] = -y[r];
            y[r] = rho[r] * (lprev[r] - lam[r]);
        }
        if (prox_stop(opt, y, mr, ++k, &res))
            break;
    }
    *iterations = k;
    *residual = res;
    return RBG_OK;
}

/* ===================================================================== */
/*  proxLTLs (Sathya 2024 eq. 16, 24)                                    */
/* ===================================================================== */

/* work: H[nv nv] dinv[nv] y[nv] inertia[10 nb] b[nv] J[m nv] oX[12 nb] Jw[6 nv] Ic[10 nb]
 *       kin[30 nb] astar[m] rho[m] wl[m] r[m] */
int rbg_prox_ltls(const rbg_model *RST m, const rbg_constraints *RST c,
                  const rbg_prox_options *RST opt, const double *RST q, const double *RST v,
                  const double *RST tau, double *RST ddq, double *RST lam,
                  double *RST iterations, double *RST residual, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m;
    double *H = work, *dinv = H + (size_t)nv * nv, *y = dinv + nv, *inertia = y + nv;
    double *b = inertia + 10 * nb, *J = b + nv, *oX = J + (size_t)mr * nv, *Jw = oX + 12 * nb;
    double *Ic = Jw + 6 * nv, *kin = Ic + 10 * nb, *astar = kin + 30 * nb, *rho = astar + mr;
    double *wl = rho + mr, *r = wl + mr;
    double *X = kin, *vel = X + 12 * nb, *cc = vel + 6 * nb, *acc = cc + 6 * nb;
    if (!all_finite(q, m->nq) || !all_finite(v, nv) || !all_finite(tau, nv) || bad_options(opt))
        return RBG_EINPUT;
    if (c->nu)
        return RBG_EUNILATERAL;
    damping(c, opt->mu, rho);

    /* inertias I_b + rho^-1 K^T K where that is constant (eq. 24): CRBA then gives M_mu */
    memcpy(inertia, m->inertia, (size_t)RBG_INERTIA_STRIDE * nb * sizeof(double));
    for (int l = 0; l < c->nc; ++l)
        if (constant_inertia(c, l)) {
            double I10[10];
            rbgi_constraint_inertia(c, l, 1.0 / rho[c->row[l]], I10);
            double *Ib = inertia + RBG_INERTIA_STRIDE * moving_body(c, l);
            for (int e = 0; e < 10; ++e)
                Ib[e] += I10[e];
        }
    /* b(q, v) = rnea(q, v, 0);  X, v, c and the drift accelerations;  J and a_c* */
    rbgi_rnea_core(m, q, v, NULL, b, kin);
    drift_kinematics(m, q, v, X, vel, cc, acc);
    world_kinematics(m, X, oX, Jw);
    joint_space_constraints(m, c, X, vel, acc, oX, Jw, J, astar);
    /* M_mu by CRBA in local frames on those inertias */
    memset(H, 0, (size_t)nv * nv * sizeof(double));
    local_crba(m, inertia, X, H, Ic);

    /* loops (and 6D constraints with frame A in the world):  M_mu += J_l^T rho^-1 J_l */
    for (int l = 0; l < c->nc; ++l) {
        if (constant_inertia(c, l))
            continue;
        for (int s = c->sup_ptr[l]; s < c->sup_ptr[l + 1]; ++s)
            for (int t = c->sup_ptr[l]; t <= s; ++t) {
                const int j = c->sup_idx[s], i = c->sup_idx[t];
                double e = 0.0;
                for (int rr = c->row[l]; rr < c->row[l + 1]; ++rr)
                    e += J[(size_t)nv * rr + j] * J[(size_t)nv * rr + i] * (1.0 / rho[rr]);
                H[(size_t)nv * j + i] += e;
            }
    }
    /* M_mu = L^T D L (Featherstone 2005 Table 2 on the M_mu pattern) */
    const int rc = rbgi_ldl_factor(nv, c->mmu_ptr, c->mmu_idx, 0, H, dinv);
    if (rc)
        return rc;

    /* ALM (eq. 16):  M_mu ddq_k = tau - b + J^T (lam_{k-1} + rho^-1 a_c*),
       r_k = J ddq_k - a_c*,  lam_k = lam_{k-1} - rho^-1 r_k */
    memset(lam, 0, (size_t)mr * sizeof(double));
    int k = 0;
    double res = 0.0;
    for (;;) {
        for (int rr = 0; rr < mr; ++rr)
            wl[rr] = lam[rr] + astar[rr] * (1.0 / rho[rr]);
        for (int d = 0; d < nv; ++d)
            y[d] = tau[d] - b[d];
        for (int l = 0; l < c->nc; ++l)
            for (int s = c->sup_ptr[l]; s < c->sup_ptr[l + 1]; ++s) {
                const int d = c->sup_idx[s];
                for (int rr = c->row[l]; rr < c->row[l + 1]; ++rr)
                    y[d] += J[(size_t)nv * rr + d] * wl[rr];
            }
        ldl_solve(nv, c->mmu_ptr, c->mmu_idx, H, dinv, y);
        memcpy(ddq, y, (size_t)nv * sizeof(double));
        if (!mr)
            break;
        for (int l = 0; l < c->nc; ++l)
            for (int rr = c->row[l]; rr < c->row[l + 1]; ++rr) {
                double s = -astar[rr];
                for (int e = c->sup_ptr[l]; e < c->sup_ptr[l + 1]; ++e)
                    s += J[(size_t)nv * rr + c->sup_idx[e]] * ddq[c->sup_idx[e]];
                r[rr] = s;
                lam[rr] -= s * (1.0 / rho[rr]);
            }
        if (prox_stop(opt, r, mr, ++k, &res))
            break;
    }
    *iterations = k;
    *residual = res;
    return RBG_OK;
}

/* ===================================================================== */
/*  Maximal-coordinate pieces shared by constrainedABA and proxPV        */
/* ===================================================================== */

/* Per constraint: K_l (rows row[l].. of K, 6 per row) and k = K g_b + rest, with g_b the
 * gravity offset -g in the body's LOCAL frame (g_i = X_i^-1 g_parent) and rest from
 * constraint_rhs; oX, g: scratch for world placements (when needed) and the offsets. */
static void maximal_constraints(const rbg_model *RST m, const rbg_constraints *RST c,
                                const rbgi_aba *RST w, double *RST oX, double *RST g,
                                double *RST K, double *RST kk)
{
    const int nb = m->nbodies;
    const double a0[6] = {-m->gravity[0], -m->gravity[1], -m->gravity[2], 0.0, 0.0, 0.0};
    int world = 0;
    for (int l = 0; l < c->nc; ++l)
        world |= needs_rel(c, l) || c->body1[l] < 0;
    for (int i = 0; i < nb; ++i) {
        const int p = m->parent[i];
        inv_motion(w->X + 12 * i, p < 0 ? a0 : g + 6 * p, g + 6 * i);
        if (world) {
            if (p < 0)
                memcpy(oX + 12 * i, w->X + 12 * i, 12 * sizeof(double));
            else
                compose(oX + 12 * p, w->X + 12 * i, oX + 12 * i);
        }
    }
    for (int l = 0; l < c->nc; ++l) {
        const int n = c->size[l], r0 = c->row[l], bl = moving_body(c, l);
        double rel[12] = {0}, rest[6];
        if (needs_rel(c, l) || c->body1[l] < 0) {
            const double o[3] = {0.0, 0.0, 0.0};
            double oc1[12], oc2[12];
            rbgi_frame_placement(c, l, 1, oX, o, oc1);
            rbgi_frame_placement(c, l, 2, oX, o, oc2);
            inv_compose(oc1, oc2, rel);
        }
        constraint_rhs(c, l, rel, w->vel, NULL, rest, NULL);
        double *Kl = K + 6 * r0;
        rbgi_constraint_K(c, l, rel, Kl);
        for (int r = 0; r < n; ++r) {
            const double *Kr = Kl + 6 * r, *gb = g + 6 * bl;
            kk[r0 + r] = Kr[0] * gb[0] + Kr[1] * gb[1] + Kr[2] * gb[2] + Kr[3] * gb[3] + Kr[4] * gb[4]
                         + Kr[5] * gb[5] + rest[r];
        }
    }
}

/* f += K_l^T y (y: the constraint's rows) */
static void add_KT(const double *RST Kl, int n, const double *RST y, double *RST f)
{
    for (int r = 0; r < n; ++r)
        for (int k = 0; k < 6; ++k)
            f[k] += Kl[6 * r + k] * y[r];
}

/* ===================================================================== */
/*  constrainedABA (Sathya 2024 Alg. 1-3)                                */
/* ===================================================================== */

/* work: aba[RBG_WORK_ABA] oX[12 nb] g[6 nb] dp[6 nb] K[6 m] k[m] rho[m] r[m] wr[m] */
rbgi_caba rbgi_caba_layout(const rbg_model *RST m, const rbg_constraints *RST c, double *RST work)
{
    const int nb = m->nbodies, mr = c->m;
    rbgi_caba s;
    s.w = rbgi_aba_layout(m, work);
    s.oX = work + RBG_WORK_ABA(nb, m->nv);
    s.g = s.oX + 12 * nb;
    s.dp = s.g + 6 * nb;
    s.K = s.dp + 6 * nb;
    s.k = s.K + 6 * mr;
    s.rho = s.k + mr;
    s.r = s.rho + mr;
    s.wr = s.r + mr;
    return s;
}

/* Alg. 1 line 5 (eq. 29) for every constraint:  IA_b += K^T K / rho,  pA_b -= K^T (k / rho) */
/* IA_b += w K^T K, the penalty inertia of constraint l on its moving body (Sathya 2024
 * eq. 24/29): a constant point mass (plus w 1 rotational for 6D) when constant_inertia,
 * else the product of its K (n x 6, row-major). */
void rbgi_add_constraint_inertia(const rbg_constraints *RST c, int l, double w, const double *RST Kl,
                                 double *RST IAb)
{
    if (constant_inertia(c, l)) {
        double I10[10], I6[36];
        rbgi_constraint_inertia(c, l, w, I10);
        rbi_matrix(I10, I6);
        for (int e = 0; e < 36; ++e)
            IAb[e] += I6[e];
        return;
    }
    for (int a = 0; a < 6; ++a)
        for (int e = 0; e < 6; ++e) {
            double t = 0.0;
            for (int rr = 0; rr < c->size[l]; ++rr)
                t += Kl[6 * rr + a] * Kl[6 * rr + e];
            IAb[6 * a + e] += w * t;
        }
}

void rbgi_caba_augment(const rbg_constraints *RST c, const rbgi_caba *RST s)
{
    for (int l = 0; l < c->nc; ++l) {
        const int n = c->size[l], r0 = c->row[l], bl = moving_body(c, l);
        const double wl = 1.0 / s->rho[r0], *Kl = s->K + 6 * r0;
        double *IAb = s->w.IA + 36 * bl, *pAb = s->w.pA + 6 * bl;
        rbgi_add_constraint_inertia(c, l, wl, Kl, IAb);
        for (int rr = 0; rr < n; ++rr)
            s->wr[r0 + rr] = -(wl * s->k[r0 + rr]);
        add_KT(Kl, n, s->wr + r0, pAb);
    }
}

/* After the augmented backward sweep: Alg. 1's roll-out over S_E, the proximal iterations
 * (eq. 27b, Alg. 2) from lam_0 = 0, then Alg. 3 lines 9-11.  The root acceleration is
 * -g of m (the gravity offset). */
void rbgi_caba_iterate(const rbg_model *RST m, const rbg_constraints *RST c, const rbg_prox_options *RST opt,
                       const rbgi_caba *RST s, double *RST ddq, double *RST lam, double *RST iterations,
                       double *RST residual)
{
    const int nb = m->nbodies, mr = c->m;
    const rbgi_aba *w = &s->w;
    double *K = s->K, *kk = s->k, *rho = s->rho, *r = s->r, *wr = s->wr, *dp = s->dp;
    /* Alg. 1, roll-out over S_E:  a_i = X_i^-1 a_p + c_i + S_i qdd_i */
    for (int i = 0; i < nb; ++i)
        if (c->se[i])
            rbgi_aba_rollout(m, i, w, ddq);

    memset(lam, 0, (size_t)mr * sizeof(double));
    int k = 0;
    double res = 0.0;
    while (mr) {
        /* r = K a_b - k;  lam <- lam - r / rho  (eq. 27b) */
        for (int l = 0; l < c->nc; ++l) {
            const int r0 = c->row[l];
            const double *ab = w->acc + 6 * moving_body(c, l);
            for (int rr = r0; rr < c->row[l + 1]; ++rr) {
                const double *Kr = K + 6 * rr;
                r[rr] = Kr[0] * ab[0] + Kr[1] * ab[1] + Kr[2] * ab[2] + Kr[3] * ab[3] + Kr[4] * ab[4]
                        + Kr[5] * ab[5] - kk[rr];
                lam[rr] -= (1.0 / rho[rr]) * r[rr];
            }
        }
        if (prox_stop(opt, r, mr, ++k, &res))
            break;
        /* Alg. 2, reduced backward sweep over S_E: the bias force changes by
           dp_b = K^T r / rho;  D^-1 u_i -= D^-1 S_i^T dp_i;  dp_parent += X_i^* P_i dp_i */
        for (int i = 0; i < nb; ++i)
            if (c->se[i])
                memset(dp + 6 * i, 0, 6 * sizeof(double));
        for (int l = 0; l < c->nc; ++l) {
            const int r0 = c->row[l];
            for (int rr = r0; rr < c->row[l + 1]; ++rr)
                wr[rr] = (1.0 / rho[rr]) * r[rr];
            add_KT(K + 6 * r0, c->size[l], wr + r0, dp + 6 * moving_body(c, l));
        }
        for (int i = nb - 1; i >= 0; --i) {
            if (!c->se[i])
                continue;
            double du[6];
            const int iv = m->idx_v[i], p = m->parent[i];
            dinv_sT(m, i, w, dp + 6 * i, du);
            for (int e = 0; e < m->nvj[i]; ++e)
                w->ud[iv + e] -= du[e];
            if (p >= 0)
                project_to_parent(m, i, w, dp + 6 * i, du, dp + 6 * p);
        }
        /* Alg. 2, roll-out over S_E */
        for (int i = 0; i < nb; ++i)
            if (c->se[i])
                rbgi_aba_rollout(m, i, w, ddq);
    }
    /* Alg. 3 lines 9-11: the bodies supporting no constraint */
    for (int i = 0; i < nb; ++i)
        if (!c->se[i])
            rbgi_aba_rollout(m, i, w, ddq);
    *iterations = k;
    *residual = res;
}

/* work: rbgi_caba_layout */
int rbg_constrained_aba(const rbg_model *RST m, const rbg_constraints *RST c,
                        const rbg_prox_options *RST opt, const double *RST q, const double *RST v,
                        const double *RST tau, double *RST ddq, double *RST lam,
                        double *RST iterations, double *RST residual, double *RST work)
{
    const rbgi_caba s = rbgi_caba_layout(m, c, work);
    if (!all_finite(q, m->nq) || !all_finite(v, m->nv) || !all_finite(tau, m->nv) || bad_options(opt))
        return RBG_EINPUT;
    if (!c->anchored)
        return RBG_ELOOP;
    if (c->nu)
        return RBG_EUNILATERAL;
    damping(c, opt->mu, s.rho);

    /* Alg. 1, first forward sweep: v_i, c_i, IA_i = I_i, pA_i = v_i x* I_i v_i, the rows
       K, k; then line 5 (eq. 29) */
    rbgi_aba_forward(m, q, v, &s.w);
    maximal_constraints(m, c, &s.w, s.oX, s.g, s.K, s.k);
    rbgi_caba_augment(c, &s);
    /* Alg. 1, backward sweep (ABA with the augmented IA, pA) */
    const int rc = rbgi_aba_backward(m, tau, &s.w);
    if (rc)
        return rc;
    rbgi_caba_iterate(m, c, opt, &s, ddq, lam, iterations, residual);
    return RBG_OK;
}

/* ===================================================================== */
/*  proxPV (Sathya 2024 Alg. 4)                                          */
/* ===================================================================== */

/* Alg. 4 lines 9-11 for the supporting body i: with KA_i^T's columns (one force per row
 * of ES(i)),
 *   l  += KA_i (c_i + S_i D_i^-1 (u_i - U_i^T c_i))
 * then L and KA_parent^T by rbgi_pv_delassus_step (the root's projection goes to the
 * extra block nb of KA). */
static void pv_step(const rbg_model *RST m, const rbg_constraints *RST c, int i,
                    const rbgi_aba *RST w, double *RST KA, double *RST T, double *RST L,
                    double *RST l)
{
    const int nb = m->nbodies, mr = c->m, p = m->parent[i], iv = m->idx_v[i];
    double *KAi = KA + (size_t)6 * mr * i, *KAp = KA + (size_t)6 * mr * (p < 0 ? nb : p);
    double z[6];                                   /* c + S D^-1 (u - U^T c) */
    if (m->jtype[i] == RBG_FREE) {
        memcpy(z, w->ud + iv, sizeof z);
    } else {
        double x[3];
        memcpy(z, w->c + 6 * i, sizeof z);
        joint_qdd(m, i, w, w->c + 6 * i, x);
        S_add(m, i, x, z);
    }
    for (int a = c->es_ptr[i]; a < c->es_ptr[i + 1]; ++a) {
        const int la = c->es_idx[a];
        for (int ra = c->row[la]; ra < c->row[la + 1]; ++ra) {
            const double *f = KAi + 6 * ra;
            l[ra] += f[0] * z[0] + f[1] * z[1] + f[2] * z[2] + f[3] * z[3] + f[4] * z[4] + f[5] * z[5];
        }
    }
    rbgi_pv_delassus_step(m, c, i, w, KAi, T, L, KAp);
}

/* The constraint-space part of PV (Sathya 2024 Alg. 4 lines 9-11) at the supporting body
 * i, shared by proxPV and cABA-OSIM: with KA_i^T's columns (one force per row of ES(i))
 * and T = D_i^-1 S_i^T KA_i^T,
 *   L += KA_i S_i D_i^-1 S_i^T KA_i^T        (lower triangle, rows of ES(i))
 *   KA_parent^T += X_i^* P_i KA_i^T,  P_i = 1 - U_i D_i^-1 S_i^T   (skipped if KAp is NULL) */
void rbgi_pv_delassus_step(const rbg_model *RST m, const rbg_constraints *RST c, int i, const rbgi_aba *RST w,
                           const double *RST KAi, double *RST T, double *RST L, double *RST KAp)
{
    const int mr = c->m;
    for (int a = c->es_ptr[i]; a < c->es_ptr[i + 1]; ++a) {
        const int la = c->es_idx[a];
        for (int ra = c->row[la]; ra < c->row[la + 1]; ++ra)
            dinv_sT(m, i, w, KAi + 6 * ra, T + 6 * ra);
    }
    for (int a = c->es_ptr[i]; a < c->es_ptr[i + 1]; ++a) {
        const int la = c->es_idx[a];
        for (int ra = c->row[la]; ra < c->row[la + 1]; ++ra) {
            const double *f = KAi + 6 * ra;
            double s[6];                           /* S^T KA_ra */
            S_dot(m, i, f, s);
            for (int b = c->es_ptr[i]; b < c->es_ptr[i + 1]; ++b) {
                const int lb = c->es_idx[b];
                for (int rb = c->row[lb]; rb < c->row[lb + 1] && rb <= ra; ++rb) {
                    const double *t = T + 6 * rb;
                    double e = s[0] * t[0];
                    for (int k = 1; k < m->nvj[i]; ++k)
                        e += s[k] * t[k];
                    L[(size_t)mr * ra + rb] += e;
                }
            }
            if (KAp)
                project_to_parent(m, i, w, f, T + 6 * ra, KAp + 6 * ra);
        }
    }
}

/* work: aba[RBG_WORK_ABA] oX[12 nb] g[6 nb] F[6 nb] K[6 m] k[m] rho[m] r[m]
 *       KA[6 m (nb + 1)] T[6 m] L[m m] dinv[m] l[m] c0[m] lprev[m] */
int rbg_prox_pv(const rbg_model *RST m, const rbg_constraints *RST c,
                const rbg_prox_options *RST opt, const double *RST q, const double *RST v,
                const double *RST tau, double *RST ddq, double *RST lam,
                double *RST iterations, double *RST residual, double *RST work)
{
    const int nb = m->nbodies, nv = m->nv, mr = c->m;
    const rbgi_aba w = rbgi_aba_layout(m, work);
    double *oX = work + RBG_WORK_ABA(nb, nv), *g = oX + 12 * nb, *F = g + 6 * nb;
    double *K = F + 6 * nb, *kk = K + 6 * mr, *rho = kk + mr, *r = rho + mr;
    double *KA = r + mr, *T = KA + (size_t)6 * mr * (nb + 1), *L = T + 6 * mr;
    double *dinv = L + (size_t)mr * mr, *l = dinv + mr, *c0 = l + mr, *lprev = c0 + mr;
    const double a0[6] = {-m->gravity[0], -m->gravity[1], -m->gravity[2], 0.0, 0.0, 0.0};
    if (!all_finite(q, m->nq) || !all_finite(v, nv) || !all_finite(tau, nv) || bad_options(opt))
        return RBG_EINPUT;
    if (!c->anchored)
        return RBG_ELOOP;
    if (c->nu)
        return RBG_EUNILATERAL;
    damping(c, opt->mu, rho);

    /* lines 1-4: forward sweep; KA_b = K (columns K^T, one per row), l = -k, L = 0 */
    rbgi_aba_forward(m, q, v, &w);
    maximal_constraints(m, c, &w, oX, g, K, kk);
    for (int i = 0; i < nb; ++i)
        if (c->se[i])
            for (int a = c->es_ptr[i]; a < c->es_ptr[i + 1]; ++a) {
                const int la = c->es_idx[a];
                memset(KA + (size_t)6 * mr * i + 6 * c->row[la], 0, (size_t)6 * c->size[la] * sizeof(double));
            }
    memset(KA + (size_t)6 * mr * nb, 0, (size_t)6 * mr * sizeof(double));
    for (int la = 0; la < c->nc; ++la) {
        double *KAb = KA + (size_t)6 * mr * moving_body(c, la);
        for (int ra = c->row[la]; ra < c->row[la + 1]; ++ra) {
            memcpy(KAb + 6 * ra, K + 6 * ra, 6 * sizeof(double));
            l[ra] = -kk[ra];
        }
    }
    memset(L, 0, (size_t)mr * mr * sizeof(double));

    /* lines 5-8: ABA backward sweep;  lines 9-11 over S_E, leaves to root */
    const int rc = rbgi_aba_backward(m, tau, &w);
    if (rc)
        return rc;
    for (int i = nb - 1; i >= 0; --i)
        if (c->se[i])
            pv_step(m, c, i, &w, KA, T, L, l);

    /* line 13 (Carpentier 2021 eq. 18 reduced to lam), the damped Delassus matrix once:
       (L_0 + rho) lam_k = rho lam_{k-1} - (KA_0 a_0 + l_0),  r_k = rho (lam_{k-1} - lam_k) */
    const double *KA0 = KA + (size_t)6 * mr * nb;
    for (int ra = 0; ra < mr; ++ra) {
        const double *f = KA0 + 6 * ra;
        c0[ra] = f[0] * a0[0] + f[1] * a0[1] + f[2] * a0[2] + f[3] * a0[3] + f[4] * a0[4] + f[5] * a0[5]
                 + l[ra];
        L[(size_t)mr * ra + ra] += rho[ra];
    }
    const int rd = rbgi_ldl_factor(mr, c->del_ptr, c->del_idx, 0, L, dinv);
    if (rd)
        return rd;
    memset(lam, 0, (size_t)mr * sizeof(double));
    int k = 0;
    double res = 0.0;
    while (mr) {
        memcpy(lprev, lam, (size_t)mr * sizeof(double));
        for (int ra = 0; ra < mr; ++ra)
            lam[ra] = rho[ra] * lprev[ra] - c0[ra];
        ldl_solve(mr, c->del_ptr, c->del_idx, L, dinv, lam);
        for (int ra = 0; ra < mr; ++ra)
            r[ra] = rho[ra] * (lprev[ra] - lam[ra]);
        if (prox_stop(opt, r, mr, ++k, &res))
            break;
    }

    /* lines 17-19 with the constraint forces: F_b = K^T lam carried root-ward through
       P_i (= KA_i^T lam):  D^-1 u_i += D^-1 S_i^T F_i,  F_parent += X_i^* P_i F_i;
       then the roll-out of every body */
    for (int i = 0; i < nb; ++i)
        if (c->se[i])
            memset(F + 6 * i, 0, 6 * sizeof(double));
    for (int la = 0; la < c->nc; ++la)
        add_KT(K + 6 * c->row[la], c->size[la], lam + c->row[la], F + 6 * moving_body(c, la));
    for (int i = nb - 1; i >= 0; --i) {
        if (!c->se[i])
            continue;
        double dv[6];
        const int iv = m->idx_v[i], p = m->parent[i];
        dinv_sT(m, i, &w, F + 6 * i, dv);
        for (int e = 0; e < m->nvj[i]; ++e)
            w.ud[iv + e] += dv[e];
        if (p >= 0)
            project_to_parent(m, i, &w, F + 6 * i, dv, F + 6 * p);
    }
    for (int i = 0; i < nb; ++i)
        rbgi_aba_rollout(m, i, &w, ddq);
    *iterations = k;
    *residual = res;
    return RBG_OK;
}
