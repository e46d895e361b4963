/*
 * rbg.c -- generic rigid-body dynamics in C99, the robot passed as data (see rbg.h).
 *
 * Notation follows Featherstone, Rigid Body Dynamics Algorithms (RBDA, 2008) in LOCAL
 * body frames with Pinocchio's conventions: X_i = (R_i, p_i) is parent <- body i,
 * spatial vectors are [linear; angular].  The transform acts through R and p
 * (RBDA §2.8 / Table 2.5), never as a 6x6 matrix:
 *
 *   X^-1 m  = (R^T (v - p x w), R^T w)          motion, parent -> child
 *   X^*  f  = (R f, R n + p x R f)              force,  child  -> parent
 *   v x  m  = (w x m_v + v_l x m_w, w x m_w)    motion cross product
 *   v x* f  = (w x f_l, w x f_a + v_l x f_l)    force cross product
 *
 * Rigid-body inertias are 10 numbers about the body origin (m, h = m c, I_O); the
 * 6x6 matrix they stand for is  I = [[m 1, -[h]x], [[h]x, I_O]].
 */
#include "rbg.h"

#include <math.h>
#include <string.h>

#define RST RBG_RESTRICT

/* ===================================================================== */
/*  3-vectors and 3x3 matrices (row-major)                               */
/* ===================================================================== */

static inline double dot3(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* out = a x b  (out must not alias a or b) */
static inline void cross3(const double *a, const double *b, double *RST out)
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* out += a x b */
static inline void cross3_add(const double *a, const double *b, double *RST out)
{
    out[0] += a[1] * b[2] - a[2] * b[1];
    out[1] += a[2] * b[0] - a[0] * b[2];
    out[2] += a[0] * b[1] - a[1] * b[0];
}

/* out = R x */
static inline void mv3(const double *R, const double *x, double *RST out)
{
    out[0] = R[0] * x[0] + R[1] * x[1] + R[2] * x[2];
    out[1] = R[3] * x[0] + R[4] * x[1] + R[5] * x[2];
    out[2] = R[6] * x[0] + R[7] * x[1] + R[8] * x[2];
}

/* out = R^T x */
static inline void mtv3(const double *R, const double *x, double *RST out)
{
    out[0] = R[0] * x[0] + R[3] * x[1] + R[6] * x[2];
    out[1] = R[1] * x[0] + R[4] * x[1] + R[7] * x[2];
    out[2] = R[2] * x[0] + R[5] * x[1] + R[8] * x[2];
}

/* out = A B */
static inline void mm3(const double *A, const double *B, double *RST out)
{
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c)
            out[3 * r + c] = A[3 * r] * B[c] + A[3 * r + 1] * B[3 + c] + A[3 * r + 2] * B[6 + c];
}

/* 1 if every x[k] is finite: x * 0 is 0 for finite x and NaN for NaN or inf. */
static int all_finite(const double *x, int n)
{
    double acc = 0.0;
    for (int k = 0; k < n; ++k)
        acc += x[k] * 0.0;
    return acc == 0.0;
}

/* ===================================================================== */
/*  Spatial arithmetic (RBDA Table 2.5, [linear; angular])               */
/* ===================================================================== */

/* out = X^-1 m = (R^T (m_v - p x m_w), R^T m_w) */
static inline void inv_motion(const double *RST X, const double *RST m, double *RST out)
{
    const double *R = X, *p = X + 9;
    double t[3];
    cross3(p, m + 3, t);
    t[0] = m[0] - t[0];
    t[1] = m[1] - t[1];
    t[2] = m[2] - t[2];
    mtv3(R, t, out);
    mtv3(R, m + 3, out + 3);
}

/* out += X^* f = (R f_l, R f_a + p x R f_l) */
static inline void act_force_add(const double *RST X, const double *RST f, double *RST out)
{
    const double *R = X, *p = X + 9;
    double fl[3], fa[3];
    mv3(R, f, fl);
    mv3(R, f + 3, fa);
    cross3_add(p, fl, fa);
    for (int k = 0; k < 3; ++k) {
        out[k] += fl[k];
        out[3 + k] += fa[k];
    }
}

/* out = X^* f */
static inline void act_force(const double *RST X, const double *RST f, double *RST out)
{
    const double *R = X, *p = X + 9;
    mv3(R, f, out);
    mv3(R, f + 3, out + 3);
    cross3_add(p, out, out + 3);
}

/* out = v x m = (w x m_v + v_l x m_w, w x m_w)  (RBDA eq. 2.31) */
static inline void cross_motion(const double *RST v, const double *RST m, double *RST out)
{
    cross3(v + 3, m, out);
    cross3_add(v, m + 3, out);
    cross3(v + 3, m + 3, out + 3);
}

/* out += v x* f = (w x f_l, w x f_a + v_l x f_l)  (RBDA eq. 2.32) */
static inline void cross_force_add(const double *RST v, const double *RST f, double *RST out)
{
    cross3_add(v + 3, f, out);
    cross3_add(v + 3, f + 3, out + 3);
    cross3_add(v, f, out + 3);
}

/* out = R S R^T for S symmetric packed (xx xy xz yy yz zz), out packed. */
static inline void rot_sym_packed(const double *RST R, const double *RST S, double *RST out)
{
    const double A[9] = {S[0], S[1], S[2], S[1], S[3], S[4], S[2], S[4], S[5]};
    double T[9];
    mm3(R, A, T);
    out[0] = T[0] * R[0] + T[1] * R[1] + T[2] * R[2];
    out[1] = T[0] * R[3] + T[1] * R[4] + T[2] * R[5];
    out[2] = T[0] * R[6] + T[1] * R[7] + T[2] * R[8];
    out[3] = T[3] * R[3] + T[4] * R[4] + T[5] * R[5];
    out[4] = T[3] * R[6] + T[4] * R[7] + T[5] * R[8];
    out[5] = T[6] * R[6] + T[7] * R[7] + T[8] * R[8];
}

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

/* out = I m = (m m_v - h x m_w, h x m_v + I_O m_w) */
static inline void rbi_apply(const double *RST I, const double *RST m, double *RST out)
{
    const double *h = I + 1, *J = I + 4;
    cross3(m + 3, h, out);                       /* -h x w = w x h */
    out[0] += I[0] * m[0];
    out[1] += I[0] * m[1];
    out[2] += I[0] * m[2];
    cross3(h, m, out + 3);
    out[3] += J[0] * m[3] + J[1] * m[4] + J[2] * m[5];
    out[4] += J[1] * m[3] + J[3] * m[4] + J[4] * m[5];
    out[5] += J[2] * m[3] + J[4] * m[4] + J[5] * m[5];
}

/* out = the 6x6 matrix [[m 1, -[h]x], [[h]x, I_O]] (row-major) */
static void rbi_matrix(const double *RST I, double *RST out)
{
    const double m = I[0], hx = I[1], hy = I[2], hz = I[3], *J = I + 4;
    const double M[36] = {
        m,   0.0, 0.0, 0.0, hz,  -hy,
        0.0, m,   0.0, -hz, 0.0, hx,
        0.0, 0.0, m,   hy,  -hx, 0.0,
        0.0, -hz, hy,  J[0], J[1], J[2],
        hz,  0.0, -hx, J[1], J[3], J[4],
        -hy, hx,  0.0, J[2], J[4], J[5]};
    memcpy(out, M, sizeof M);
}

/* Ip += X^* I X^-1 for a rigid-body inertia I given in the child frame:
 *   m' = m,  y = R h,  h' = y + m p,
 *   I_O' = R I_O R^T + 2 (y.p) 1 - p y^T - y p^T + m (|p|^2 1 - p p^T)
 * (RBDA eq. 2.66 with the parallel-axis shift written for I about the origin). */
static void rbi_act_add(const double *RST X, const double *RST I, double *RST Ip)
{
    const double *R = X, *p = X + 9;
    const double m = I[0];
    double y[3], J[6];
    mv3(R, I + 1, y);
    rot_sym_packed(R, I + 4, J);
    const double yp = dot3(y, p), pp = dot3(p, p);
    Ip[0] += m;
    Ip[1] += y[0] + m * p[0];
    Ip[2] += y[1] + m * p[1];
    Ip[3] += y[2] + m * p[2];
    Ip[4] += J[0] + 2.0 * (yp - p[0] * y[0]) + m * (pp - p[0] * p[0]);
    Ip[5] += J[1] - p[0] * y[1] - y[0] * p[1] - m * p[0] * p[1];
    Ip[6] += J[2] - p[0] * y[2] - y[0] * p[2] - m * p[0] * p[2];
    Ip[7] += J[3] + 2.0 * (yp - p[1] * y[1]) + m * (pp - p[1] * p[1]);
    Ip[8] += J[4] - p[1] * y[2] - y[1] * p[2] - m * p[1] * p[2];
    Ip[9] += J[5] + 2.0 * (yp - p[2] * y[2]) + m * (pp - p[2] * p[2]);
}

/* ===================================================================== */
/*  Articulated inertia (symmetric 6x6, row-major)                       */
/* ===================================================================== */

/* Ip += X^* Ia X^-1 for a symmetric 6x6 Ia = [[A, B], [B^T, C]] in the child frame.
 * Rotate the blocks, A' = R A R^T, B' = R B R^T, C' = R C R^T, then shift by
 * P = [p]x (RBDA eq. 2.66 in block form):
 *   [[A', B' - A'P], [(B' - A'P)^T, C' + P B' + (P B')^T - P A' P]]. */
static void inertia6_act_add(const double *RST X, const double *RST Ia, double *RST Ip)
{
    const double *R = X, *p = X + 9;
    double A[9], B[9], T[9], U[9];
    /* A' = R A R^T, C' = R C R^T (symmetric: upper triangle, mirrored) */
    const double As[6] = {Ia[0], Ia[1], Ia[2], Ia[7], Ia[8], Ia[14]};
    const double Cs[6] = {Ia[21], Ia[22], Ia[23], Ia[28], Ia[29], Ia[35]};
    double a[6], c[6];
    rot_sym_packed(R, As, a);
    rot_sym_packed(R, Cs, c);
    A[0] = a[0]; A[1] = a[1]; A[2] = a[2];
    A[3] = a[1]; A[4] = a[3]; A[5] = a[4];
    A[6] = a[2]; A[7] = a[4]; A[8] = a[5];
    /* B' = R B R^T */
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k)
            U[3 * r + k] = Ia[6 * r + 3 + k];
    mm3(R, U, T);
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k)
            B[3 * r + k] = T[3 * r] * R[3 * k] + T[3 * r + 1] * R[3 * k + 1] + T[3 * r + 2] * R[3 * k + 2];
    /* top-right  TR = B' - A' P;  row r of A' [p]x is A'[r,:] x p */
    double TR[9], AP[9];
    for (int r = 0; r < 3; ++r) {
        cross3(A + 3 * r, p, AP + 3 * r);
        for (int k = 0; k < 3; ++k)
            TR[3 * r + k] = B[3 * r + k] - AP[3 * r + k];
    }
    /* PB = [p]x B' and PAP = [p]x (A' P): column k is p x (column k) */
    double PB[9], PAP[9];
    for (int k = 0; k < 3; ++k) {
        const double bk[3] = {B[k], B[3 + k], B[6 + k]};
        const double ak[3] = {AP[k], AP[3 + k], AP[6 + k]};
        double t1[3], t2[3];
        cross3(p, bk, t1);
        cross3(p, ak, t2);
        PB[k] = t1[0]; PB[3 + k] = t1[1]; PB[6 + k] = t1[2];
        PAP[k] = t2[0]; PAP[3 + k] = t2[1]; PAP[6 + k] = t2[2];
    }
    /* accumulate: top-left A', off-diagonal TR / TR^T, bottom-right C' + PB + PB^T - PAP */
    const int iu[6] = {0, 0, 0, 1, 1, 2}, ju[6] = {0, 1, 2, 1, 2, 2};
    for (int e = 0; e < 6; ++e) {
        const int r = iu[e], k = ju[e];
        const double br = c[e] + PB[3 * r + k] + PB[3 * k + r] - PAP[3 * r + k];
        Ip[6 * r + k] += A[3 * r + k];
        Ip[6 * (3 + r) + 3 + k] += br;
        if (r != k) {
            Ip[6 * k + r] += A[3 * r + k];
            Ip[6 * (3 + k) + 3 + r] += br;
        }
    }
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k) {
            Ip[6 * r + 3 + k] += TR[3 * r + k];
            Ip[6 * (3 + k) + r] += TR[3 * r + k];
        }
}

/* In place A = L D L^T of a symmetric positive-definite 6x6 (row-major, lower
 * triangle used), then x <- A^-1 x.  RBG_ESINGULAR on a non-positive pivot. */
static int ldlt6_solve(double *RST A, double *RST x)
{
    double dinv[6];
    for (int j = 0; j < 6; ++j) {
        /* D_j = A_jj - sum_k L_jk^2 D_k ;  L_ij = (A_ij - sum_k L_ik L_jk D_k) / D_j */
        double d = A[7 * j];
        for (int k = 0; k < j; ++k)
            d -= A[6 * j + k] * A[6 * j + k] * A[7 * k];
        if (!(d > 0.0))
            return RBG_ESINGULAR;
        A[7 * j] = d;
        dinv[j] = 1.0 / d;
        for (int i = j + 1; i < 6; ++i) {
            double s = A[6 * i + j];
            for (int k = 0; k < j; ++k)
                s -= A[6 * i + k] * A[6 * j + k] * A[7 * k];
            A[6 * i + j] = s * dinv[j];
        }
    }
    for (int i = 0; i < 6; ++i)                  /* L y = x */
        for (int k = 0; k < i; ++k)
            x[i] -= A[6 * i + k] * x[k];
    for (int i = 5; i >= 0; --i) {               /* D L^T x = y */
        x[i] *= dinv[i];
        for (int k = i + 1; k < 6; ++k)
            x[i] -= A[6 * k + i] * x[k];
    }
    return RBG_OK;
}

/* ===================================================================== */
/*  Joints: transforms and motion subspaces                              */
/* ===================================================================== */

/* R = P * Rot(axis, c, s) with Rodrigues' Rot = c 1 + s [u]x + (1 - c) u u^T;
 * about +e_k only two columns of P mix. */
static void placement_times_rotation(const double *RST P, int k, const double *RST u,
                                     double c, double s, double *RST R)
{
    if (k >= 0) {
        const int i = (k + 1) % 3, j = (k + 2) % 3;
        for (int r = 0; r < 3; ++r) {
            R[3 * r + i] = c * P[3 * r + i] + s * P[3 * r + j];
            R[3 * r + j] = c * P[3 * r + j] - s * P[3 * r + i];
            R[3 * r + k] = P[3 * r + k];
        }
        return;
    }
    const double t = 1.0 - c;
    const double Rj[9] = {
        t * u[0] * u[0] + c,        t * u[0] * u[1] - s * u[2], t * u[0] * u[2] + s * u[1],
        t * u[1] * u[0] + s * u[2], t * u[1] * u[1] + c,        t * u[1] * u[2] - s * u[0],
        t * u[2] * u[0] - s * u[1], t * u[2] * u[1] + s * u[0], t * u[2] * u[2] + c};
    mm3(P, Rj, R);
}

/* X_i = placement_i * joint_i(q_i) = (R, p), stored as 12 doubles [R row-major, p]. */
static void joint_transform(const rbg_model *RST m, int i, const double *RST q, double *RST X)
{
    const double *P = m->plc_R + 9 * i, *pp = m->plc_p + 3 * i, *qi = q + m->idx_q[i];
    double *R = X, *p = X + 9;
    switch (m->jtype[i]) {
    case RBG_REVOLUTE:
        placement_times_rotation(P, m->axis_k[i], m->axis + 3 * i, cos(qi[0]), sin(qi[0]), R);
        memcpy(p, pp, 3 * sizeof(double));
        break;
    case RBG_REVOLUTE_UNB:
        placement_times_rotation(P, m->axis_k[i], m->axis + 3 * i, qi[0], qi[1], R);
        memcpy(p, pp, 3 * sizeof(double));
        break;
    case RBG_PRISMATIC: {
        /* R = P, p = pp + P (axis q) */
        const double *u = m->axis + 3 * i;
        const double d[3] = {u[0] * qi[0], u[1] * qi[0], u[2] * qi[0]};
        memcpy(R, P, 9 * sizeof(double));
        mv3(P, d, p);
        p[0] += pp[0];
        p[1] += pp[1];
        p[2] += pp[2];
        break;
    }
    default: { /* RBG_FREE: R = P R(quat), p = pp + P t;  Eigen's toRotationMatrix */
        const double x = qi[3], y = qi[4], z = qi[5], w = qi[6];
        const double Rj[9] = {
            1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w),       2.0 * (x * z + y * w),
            2.0 * (x * y + z * w),       1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
            2.0 * (x * z - y * w),       2.0 * (y * z + x * w),       1.0 - 2.0 * (x * x + y * y)};
        mm3(P, Rj, R);
        mv3(P, qi, p);
        p[0] += pp[0];
        p[1] += pp[1];
        p[2] += pp[2];
        break;
    }
    }
}

/* Offset of a 1-DoF joint's subspace in a spatial vector: prismatic moves the linear
 * part, revolute the angular part.  S = [0; u] or [u; 0]. */
static inline int s_offset(int jtype)
{
    return jtype == RBG_PRISMATIC ? 0 : 3;
}

/* out += S_i x for a 1-DoF joint (x scalar) */
static inline void S_add1(const rbg_model *RST m, int i, double x, double *RST out)
{
    const int o = s_offset(m->jtype[i]), k = m->axis_k[i];
    if (k >= 0) {
        out[o + k] += x;
    } else {
        const double *u = m->axis + 3 * i;
        out[o] += u[0] * x;
        out[o + 1] += u[1] * x;
        out[o + 2] += u[2] * x;
    }
}

/* out += S_i x  (x has nvj[i] entries) */
static inline void S_add(const rbg_model *RST m, int i, const double *RST x, double *RST out)
{
    if (m->jtype[i] == RBG_FREE) {
        for (int k = 0; k < 6; ++k)
            out[k] += x[k];
    } else {
        S_add1(m, i, x[0], out);
    }
}

/* S_i^T f for a 1-DoF joint */
static inline double S_dot1(const rbg_model *RST m, int i, const double *RST f)
{
    const int o = s_offset(m->jtype[i]), k = m->axis_k[i];
    return k >= 0 ? f[o + k] : dot3(m->axis + 3 * i, f + o);
}

/* out[0..nvj) = S_i^T f */
static inline void S_dot(const rbg_model *RST m, int i, const double *RST f, double *RST out)
{
    if (m->jtype[i] == RBG_FREE)
        memcpy(out, f, 6 * sizeof(double));
    else
        out[0] = S_dot1(m, i, f);
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
    }
    return 0;
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
static void rnea_core(const rbg_model *RST m, const double *RST q, const double *RST v,
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
    rnea_core(m, q, v, a, tau, work);
    return RBG_OK;
}

int rbg_nle(const rbg_model *RST m, const double *RST q, const double *RST v,
            double *RST b, double *RST work)
{
    if (!all_finite(q, m->nq) || !all_finite(v, m->nv))
        return RBG_EINPUT;
    rnea_core(m, q, v, NULL, b, work);
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
 * every quantity expressed in the world frame, the walk "F = X_j^* F up the support"
 * of the local form becomes the identity, and each entry is a 6-term dot product:
 *   oX_i = oX_parent X_i                       body placements
 *   J_r  = oX_i S_i e_k                        world motion subspace of dof r
 *   Yc_i = oX_i^* I_i oX_i^-1 + sum_children Yc_c   composite inertias (world)
 *   M_rc = J_c^T (Yc_i J_r)  for c in the lambda-chain of r (r itself included)
 * work: oX[12 nb] Yc[10 nb] J[6 nv]. */
static void crba_core(const rbg_model *RST m, const double *RST q, double *RST M,
                      double *RST work, int mirror)
{
    const int nb = m->nbodies, nv = m->nv;
    const int *lam = m->dof_parent;
    double *oX = work, *Yc = oX + 12 * nb, *J = Yc + 10 * nb;

    /* --- forward: oX_i, J_r, Yc_i = oX_i^* I_i --- */
    for (int i = 0; i < nb; ++i) {
        double *Xo = oX + 12 * i, *Ji = J + 6 * m->idx_v[i];
        const int p = m->parent[i];
        if (p < 0) {
            joint_transform(m, i, q, Xo);
        } else {
            /* oR_i = oR_p R_i,  op_i = oR_p p_i + op_p */
            double Xi[12];
            const double *Xp = oX + 12 * p;
            joint_transform(m, i, q, Xi);
            mm3(Xp, Xi, Xo);
            mv3(Xp, Xi + 9, Xo + 9);
            Xo[9] += Xp[9];
            Xo[10] += Xp[10];
            Xo[11] += Xp[11];
        }
        const double *R = Xo, *pw = Xo + 9;
        if (m->jtype[i] == RBG_FREE) {
            /* J = oX_i: linear columns [R e_k; 0], angular columns [p x R e_k; R e_k] */
            for (int k = 0; k < 3; ++k) {
                double *Jl = Ji + 6 * k, *Ja = Ji + 6 * (3 + k);
                const double w[3] = {R[k], R[3 + k], R[6 + k]};
                Jl[0] = w[0]; Jl[1] = w[1]; Jl[2] = w[2];
                Jl[3] = Jl[4] = Jl[5] = 0.0;
                cross3(pw, w, Ja);
                Ja[3] = w[0]; Ja[4] = w[1]; Ja[5] = w[2];
            }
        } else {
            /* world axis w = oR u;  revolute J = [p x w; w], prismatic J = [w; 0] */
            const int k = m->axis_k[i];
            double w[3];
            if (k >= 0) {
                w[0] = R[k]; w[1] = R[3 + k]; w[2] = R[6 + k];
            } else {
                mv3(R, m->axis + 3 * i, w);
            }
            if (m->jtype[i] == RBG_PRISMATIC) {
                Ji[0] = w[0]; Ji[1] = w[1]; Ji[2] = w[2];
                Ji[3] = Ji[4] = Ji[5] = 0.0;
            } else {
                cross3(pw, w, Ji);
                Ji[3] = w[0]; Ji[4] = w[1]; Ji[5] = w[2];
            }
        }
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
    crba_core(m, q, M, work, 1);
    return RBG_OK;
}

/* ===================================================================== */
/*  Sparse factorisations over lambda (Featherstone 2005 Table 2)        */
/* ===================================================================== */

/* In place H = L^T D L on the lower triangle (D on the diagonal, L_ki below):
 *   for k = n-1 .. 0:  for i in lambda-chain(lambda(k)):
 *       a = H_ki / H_kk;  H_ij -= a H_kj  for j in chain(i);  H_ki = a */
static int ltdl_inplace(const int *RST lam, int n, double *RST H)
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
static int ltl_inplace(const int *RST lam, int n, double *RST H)
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
    crba_core(m, q, L, work, 0);
    const int rc = ltdl_inplace(m->dof_parent, n, L);
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
    crba_core(m, q, L, work, 0);
    return ltl_inplace(m->dof_parent, n, L);
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
    crba_core(m, q, H, work + (size_t)n * (size_t)n, 0);
    const int rc = ltdl_inplace(lam, n, H);
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

/* work: X[12 nb] vel[6 nb] c[6 nb] IA[36 nb] pA[6 nb] U[6 nb] acc[6 nb] Dinv[nb] ud[nv]
 * For a 1-DoF joint ud holds D^-1 u; for a free joint IA^-1 u (6 entries). */
int rbg_aba(const rbg_model *RST m, const double *RST q, const double *RST v,
            const double *RST tau, double *RST ddq, double *RST work)
{
    const int nb = m->nbodies;
    double *X = work, *vel = X + 12 * nb, *c = vel + 6 * nb, *IA = c + 6 * nb;
    double *pA = IA + 36 * nb, *U = pA + 6 * nb, *acc = U + 6 * nb, *Dinv = acc + 6 * nb;
    double *ud = Dinv + nb;
    const double a0[6] = {-m->gravity[0], -m->gravity[1], -m->gravity[2], 0.0, 0.0, 0.0};

    if (!all_finite(q, m->nq) || !all_finite(v, m->nv) || !all_finite(tau, m->nv))
        return RBG_EINPUT;

    /* --- pass 1 (forward): v_i = X_i^-1 v_p + S_i qd_i,  c_i = v_i x S_i qd_i,
           IA_i = I_i,  pA_i = v_i x* I_i v_i --- */
    for (int i = 0; i < nb; ++i) {
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
        const double *Ii = m->inertia + RBG_INERTIA_STRIDE * i;
        double hv[6];
        rbi_matrix(Ii, IA + 36 * i);
        rbi_apply(Ii, vi, hv);
        memset(pA + 6 * i, 0, 6 * sizeof(double));
        cross_force_add(vi, hv, pA + 6 * i);
    }

    /* --- pass 2 (backward): articulated inertias and bias forces --- */
    for (int i = nb - 1; i >= 0; --i) {
        double *IAi = IA + 36 * i, *pAi = pA + 6 * i, *Ui = U + 6 * i;
        const int p = m->parent[i], iv = m->idx_v[i];
        if (m->jtype[i] == RBG_FREE) {
            /* D = IA_i (S = 1):  u = tau_i - pA_i,  ud = IA_i^-1 u.
               Ia = IA - IA IA^-1 IA = 0 and pa = pA + IA IA^-1 u = tau_i, so the
               parent only receives  pA_p += X_i^* tau_i. */
            double *x = ud + iv;
            for (int k = 0; k < 6; ++k)
                x[k] = tau[iv + k] - pAi[k];
            if (ldlt6_solve(IAi, x))
                return RBG_ESINGULAR;
            if (p >= 0)
                act_force_add(X + 12 * i, tau + iv, pA + 6 * p);
            continue;
        }
        /* U_i = IA_i S_i,  D_i = S_i^T U_i,  u_i = tau_i - S_i^T pA_i */
        const int o = s_offset(m->jtype[i]), k = m->axis_k[i];
        if (k >= 0) {
            memcpy(Ui, IAi + 6 * (o + k), 6 * sizeof(double));   /* row = column */
        } else {
            const double *u = m->axis + 3 * i;
            for (int r = 0; r < 6; ++r)
                Ui[r] = IAi[6 * r + o] * u[0] + IAi[6 * r + o + 1] * u[1] + IAi[6 * r + o + 2] * u[2];
        }
        const double D = S_dot1(m, i, Ui);
        if (!(D > 0.0))
            return RBG_ESINGULAR;
        Dinv[i] = 1.0 / D;
        ud[iv] = (tau[iv] - S_dot1(m, i, pAi)) * Dinv[i];
        if (p < 0)
            continue;
        /* Ia = IA_i - U_i D_i^-1 U_i^T  (in place, symmetric) */
        for (int r = 0; r < 6; ++r) {
            const double s = Ui[r] * Dinv[i];
            for (int l = r; l < 6; ++l) {
                IAi[6 * r + l] -= s * Ui[l];
                IAi[6 * l + r] = IAi[6 * r + l];
            }
        }
        /* pa = pA_i + Ia c_i + U_i D_i^-1 u_i */
        double pa[6];
        const double *ci = c + 6 * i;
        for (int r = 0; r < 6; ++r) {
            const double *row = IAi + 6 * r;
            pa[r] = pAi[r] + row[0] * ci[0] + row[1] * ci[1] + row[2] * ci[2] + row[3] * ci[3]
                    + row[4] * ci[4] + row[5] * ci[5] + Ui[r] * ud[iv];
        }
        /* IA_p += X_i^* Ia X_i^-1;  pA_p += X_i^* pa */
        inertia6_act_add(X + 12 * i, IAi, IA + 36 * p);
        act_force_add(X + 12 * i, pa, pA + 6 * p);
    }

    /* --- pass 3 (forward): a' = X_i^-1 a_p + c_i,  qdd_i = D_i^-1 (u_i - U_i^T a'),
           a_i = a' + S_i qdd_i   (a_0 = -g) --- */
    for (int i = 0; i < nb; ++i) {
        double *ai = acc + 6 * i;
        const int p = m->parent[i], iv = m->idx_v[i];
        inv_motion(X + 12 * i, p < 0 ? a0 : acc + 6 * p, ai);
        for (int k = 0; k < 6; ++k)
            ai[k] += c[6 * i + k];
        if (m->jtype[i] == RBG_FREE) {
            /* qdd = IA^-1 (u - IA a') = ud - a';  a_i = a' + qdd = ud */
            for (int k = 0; k < 6; ++k) {
                ddq[iv + k] = ud[iv + k] - ai[k];
                ai[k] = ud[iv + k];
            }
        } else {
            const double *Ui = U + 6 * i;
            const double qdd = ud[iv] - Dinv[i] * (Ui[0] * ai[0] + Ui[1] * ai[1] + Ui[2] * ai[2]
                                                   + Ui[3] * ai[3] + Ui[4] * ai[4] + Ui[5] * ai[5]);
            ddq[iv] = qdd;
            S_add1(m, i, qdd, ai);
        }
    }
    return RBG_OK;
}
