/*
 * rbg_internal.h -- pieces shared by rbg.c, rbg_constrained.c, rbg_delassus.c and
 * rbg_events.c.  NOT
 * part of the API: spatial arithmetic, joints, the passes of RNEA, CRBA and ABA and the
 * constraint kinematics that the constrained and Delassus algorithms reuse.  Conventions
 * and notation are those of rbg.h / rbg.c: LOCAL body frames, X_i = (R_i, p_i) is
 * parent <- body i stored as 12 doubles [R row-major, p], spatial vectors
 * [linear; angular], and the transform acts through R and p
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
#ifndef RBG_INTERNAL_H
#define RBG_INTERNAL_H

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
static inline int all_finite(const double *x, int n)
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
static inline void rbi_matrix(const double *RST I, double *RST out)
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
static inline void rbi_act_add(const double *RST X, const double *RST I, double *RST Ip)
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
static inline void inertia6_act_add(const double *RST X, const double *RST Ia, double *RST Ip)
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

/* In place A = L D L^T of a symmetric positive-definite n x n, n <= 6 (row-major, lower
 * triangle used): L below the diagonal, D^-1 on it.  RBG_ESINGULAR on a non-positive
 * pivot.  (A free joint's 6x6 D_i, a spherical or planar joint's 3x3.) */
static inline int ldlt_factor(double *RST A, int n)
{
    double d[6];
    for (int j = 0; j < n; ++j) {
        /* D_j = A_jj - sum_k L_jk^2 D_k ;  L_ij = (A_ij - sum_k L_ik L_jk D_k) / D_j */
        double dj = A[(n + 1) * j];
        for (int k = 0; k < j; ++k)
            dj -= A[n * j + k] * A[n * j + k] * d[k];
        if (!(dj > 0.0))
            return RBG_ESINGULAR;
        d[j] = dj;
        A[(n + 1) * j] = 1.0 / dj;
        for (int i = j + 1; i < n; ++i) {
            double s = A[n * i + j];
            for (int k = 0; k < j; ++k)
                s -= A[n * i + k] * A[n * j + k] * d[k];
            A[n * i + j] = s * A[(n + 1) * j];
        }
    }
    return RBG_OK;
}

/* x <- A^-1 x with A (n x n) factored by ldlt_factor. */
static inline void ldlt_solve(const double *RST A, int n, double *RST x)
{
    for (int i = 0; i < n; ++i)                  /* L y = x */
        for (int k = 0; k < i; ++k)
            x[i] -= A[n * i + k] * x[k];
    for (int i = n - 1; i >= 0; --i) {           /* D L^T x = y */
        x[i] *= A[(n + 1) * i];
        for (int k = i + 1; k < n; ++k)
            x[i] -= A[n * k + i] * x[k];
    }
}

/* ===================================================================== */
/*  Joints: transforms and motion subspaces                              */
/* ===================================================================== */

/* R = P * Rot(axis, c, s) with Rodrigues' Rot = c 1 + s [u]x + (1 - c) u u^T;
 * about +e_k only two columns of P mix. */
static inline void placement_times_rotation(const double *RST P, int k, const double *RST u,
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

/* R = P R(x, y, z, w) for the unit quaternion quat = (x, y, z, w): Eigen's
 * toRotationMatrix. */
static inline void quat_times(const double *RST P, const double *RST quat, double *RST R)
{
    const double x = quat[0], y = quat[1], z = quat[2], w = quat[3];
    const double Rj[9] = {
        1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w),       2.0 * (x * z + y * w),
        2.0 * (x * y + z * w),       1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
        2.0 * (x * z - y * w),       2.0 * (y * z + x * w),       1.0 - 2.0 * (x * x + y * y)};
    mm3(P, Rj, R);
}

/* X_i = placement_i * joint_i(q_i) = (R, p), stored as 12 doubles [R row-major, p]
 * (gen/spatial.py joint_motion). */
static inline void joint_transform(const rbg_model *RST m, int i, const double *RST q, double *RST X)
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
    case RBG_HELICAL: {
        /* R = P Rot(axis, q), p = pp + P (pitch q axis)  (a screw about the axis) */
        const double *u = m->axis + 3 * i, h = m->pitch[i];
        const double d[3] = {h * u[0] * qi[0], h * u[1] * qi[0], h * u[2] * qi[0]};
        placement_times_rotation(P, m->axis_k[i], u, cos(qi[0]), sin(qi[0]), R);
        mv3(P, d, p);
        p[0] += pp[0];
        p[1] += pp[1];
        p[2] += pp[2];
        break;
    }
    case RBG_PLANAR: {
        /* q = (x, y, cos, sin):  R = P Rz(cos, sin), p = pp + P (x, y, 0) */
        const double ez[3] = {0.0, 0.0, 1.0};
        placement_times_rotation(P, 2, ez, qi[2], qi[3], R);
        for (int r = 0; r < 3; ++r)
            p[r] = pp[r] + P[3 * r] * qi[0] + P[3 * r + 1] * qi[1];
        break;
    }
    case RBG_SPHERICAL: /* R = P R(quat), p = pp */
        quat_times(P, qi, R);
        memcpy(p, pp, 3 * sizeof(double));
        break;
    default: /* RBG_FREE: R = P R(quat), p = pp + P t */
        quat_times(P, qi + 3, R);
        mv3(P, qi, p);
        p[0] += pp[0];
        p[1] += pp[1];
        p[2] += pp[2];
        break;
    }
}


/* Motion subspaces S_i in the LOCAL frame (gen/spatial.py motion_subspace):
 *   revolute, continuous  S = [0; u]           prismatic  S = [u; 0]
 *   helical               S = [h u; u]  (h = pitch[i])
 *   spherical             S = [0; 1_3]         planar     S = [e_x e_y 0; 0 0 e_z]
 *   free                  S = 1_6
 * Offset of a 1-DoF joint's axis in a spatial vector: prismatic moves the linear part,
 * revolute and helical the angular part (a helical joint's linear part h u is added
 * to it). */
static inline int s_offset(int jtype)
{
    return jtype == RBG_PRISMATIC ? 0 : 3;
}

/* Column k of a 3-DoF joint's S is e_{s_col3(k)}: spherical 3, 4, 5; planar 0, 1, 5. */
static inline int s_col3(int jtype, int k)
{
    return jtype == RBG_SPHERICAL ? 3 + k : (k < 2 ? k : 5);
}

/* out += S_i x for a 1-DoF joint (x scalar) */
static inline void S_add1(const rbg_model *RST m, int i, double x, double *RST out)
{
    const int o = s_offset(m->jtype[i]), k = m->axis_k[i];
    const double *u = m->axis + 3 * i;
    if (k >= 0) {
        out[o + k] += x;
    } else {
        out[o] += u[0] * x;
        out[o + 1] += u[1] * x;
        out[o + 2] += u[2] * x;
    }
    if (m->jtype[i] == RBG_HELICAL) {
        /* the linear part h u x */
        const double hx = m->pitch[i] * x;
        if (k >= 0) {
            out[k] += hx;
        } else {
            out[0] += u[0] * hx;
            out[1] += u[1] * hx;
            out[2] += u[2] * hx;
        }
    }
}

/* out += S_i x  (x has nvj[i] entries) */
static inline void S_add(const rbg_model *RST m, int i, const double *RST x, double *RST out)
{
    if (m->jtype[i] == RBG_FREE) {
        for (int k = 0; k < 6; ++k)
            out[k] += x[k];
    } else if (m->nvj[i] == 3) {
        for (int k = 0; k < 3; ++k)
            out[s_col3(m->jtype[i], k)] += x[k];
    } else {
        S_add1(m, i, x[0], out);
    }
}

/* out += S_i e_k, column k of S_i */
static inline void S_col(const rbg_model *RST m, int i, int k, double *RST out)
{
    if (m->jtype[i] == RBG_FREE)
        out[k] += 1.0;
    else if (m->nvj[i] == 3)
        out[s_col3(m->jtype[i], k)] += 1.0;
    else
        S_add1(m, i, 1.0, out);
}

/* S_i^T f for a 1-DoF joint */
static inline double S_dot1(const rbg_model *RST m, int i, const double *RST f)
{
    const int o = s_offset(m->jtype[i]), k = m->axis_k[i];
    const double *u = m->axis + 3 * i;
    if (m->jtype[i] == RBG_HELICAL)     /* u . f_a + h u . f_l */
        return k >= 0 ? f[3 + k] + m->pitch[i] * f[k] : dot3(u, f + 3) + m->pitch[i] * dot3(u, f);
    return k >= 0 ? f[o + k] : dot3(u, f + o);
}

/* out[0..nvj) = S_i^T f */
static inline void S_dot(const rbg_model *RST m, int i, const double *RST f, double *RST out)
{
    if (m->jtype[i] == RBG_FREE) {
        memcpy(out, f, 6 * sizeof(double));
    } else if (m->nvj[i] == 3) {
        for (int k = 0; k < 3; ++k)
            out[k] = f[s_col3(m->jtype[i], k)];
    } else {
        out[0] = S_dot1(m, i, f);
    }
}

/* U_i = IA_i S_i for a 1-DoF joint (a column of IA_i when the axis is +e_k, plus h times
 * another for a helical joint); returns D_i = S_i^T U_i  (RBDA Table 7.1). */
static inline double joint_U(const rbg_model *RST m, int i, const double *RST IAi, double *RST Ui)
{
    const int o = s_offset(m->jtype[i]), k = m->axis_k[i];
    const double *u = m->axis + 3 * i;
    if (k >= 0) {
        memcpy(Ui, IAi + 6 * (o + k), 6 * sizeof(double));   /* row = column */
    } else {
        for (int r = 0; r < 6; ++r)
            Ui[r] = IAi[6 * r + o] * u[0] + IAi[6 * r + o + 1] * u[1] + IAi[6 * r + o + 2] * u[2];
    }
    if (m->jtype[i] == RBG_HELICAL) {
        /* + IA_i [h u; 0] */
        const double h = m->pitch[i];
        for (int r = 0; r < 6; ++r)
            Ui[r] += h * (k >= 0 ? IAi[6 * k + r]
                                 : IAi[6 * r] * u[0] + IAi[6 * r + 1] * u[1] + IAi[6 * r + 2] * u[2]);
    }
    return S_dot1(m, i, Ui);
}

/* The articulated step of a 3-DoF joint (spherical, planar; RBDA Table 7.1):
 *   U_i = IA_i S_i (three columns of IA_i),  D_i = S_i^T U_i = L D L^T,
 *   Ia = IA_i - U_i D_i^-1 U_i^T  (when Ia is not NULL; upper triangle, mirrored).
 * On return the IA_i block holds U_i (column k at IA_i + 6 k) and D_i's factor (3x3 at
 * IA_i + 18), as a free joint's holds the factor of its D_i = IA_i (joint_U3, joint_D3).
 * RBG_ESINGULAR on a non-positive pivot. */
static inline int joint_step3(const rbg_model *RST m, int i, double *RST IAi, double *RST Ia)
{
    const int t = m->jtype[i];
    double U[18], D[9];
    for (int k = 0; k < 3; ++k)
        memcpy(U + 6 * k, IAi + 6 * s_col3(t, k), 6 * sizeof(double));   /* row = column */
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k)
            D[3 * r + k] = U[6 * k + s_col3(t, r)];
    if (ldlt_factor(D, 3))
        return RBG_ESINGULAR;
    if (Ia) {
        /* W = D^-1 U^T, column l = D^-1 (row l of U) */
        double W[18];
        for (int l = 0; l < 6; ++l) {
            double *x = W + 3 * l;
            x[0] = U[l];
            x[1] = U[6 + l];
            x[2] = U[12 + l];
            ldlt_solve(D, 3, x);
        }
        for (int r = 0; r < 6; ++r)
            for (int l = r; l < 6; ++l) {
                const double *w = W + 3 * l;
                Ia[6 * r + l] = IAi[6 * r + l] - (U[r] * w[0] + U[6 + r] * w[1] + U[12 + r] * w[2]);
                Ia[6 * l + r] = Ia[6 * r + l];
            }
    }
    memcpy(IAi, U, sizeof U);
    memcpy(IAi + 18, D, sizeof D);
    return RBG_OK;
}

/* U_i (6x3, column k at + 6 k) and D_i's factor (3x3) of a 3-DoF joint after joint_step3. */
static inline const double *joint_U3(const double *IAi)
{
    return IAi;
}

static inline const double *joint_D3(const double *IAi)
{
    return IAi + 18;
}

/* Ia = IA_i - U_i D_i^-1 U_i^T in place (symmetric: upper triangle, mirrored). */
static inline void articulated_update(double *RST IAi, const double *RST Ui, double Dinv)
{
    for (int r = 0; r < 6; ++r) {
        const double s = Ui[r] * Dinv;
        for (int l = r; l < 6; ++l) {
            IAi[6 * r + l] -= s * Ui[l];
            IAi[6 * l + r] = IAi[6 * r + l];
        }
    }
}

/* oX_i from the local X_i in the frame with the world's axes at body 0's origin o:
 * a root's X_i shifted by -o (o = the translation of X_0, set when i == 0), else
 *   oR_i = oR_p R_i,  op_i = oR_p p_i + op_p */
static inline void world_placement(const rbg_model *RST m, int i, const double *RST Xi,
                                   double *RST oX, double *RST o)
{
    double *Xo = oX + 12 * i;
    const int p = m->parent[i];
    if (p < 0) {
        if (i == 0)
            memcpy(o, Xi + 9, 3 * sizeof(double));
        memcpy(Xo, Xi, 9 * sizeof(double));
        Xo[9] = Xi[9] - o[0];
        Xo[10] = Xi[10] - o[1];
        Xo[11] = Xi[11] - o[2];
        return;
    }
    const double *Xp = oX + 12 * p;
    mm3(Xp, Xi, Xo);
    mv3(Xp, Xi + 9, Xo + 9);
    Xo[9] += Xp[9];
    Xo[10] += Xp[10];
    Xo[11] += Xp[11];
}

/* J = oX_i S_i, the motion subspaces of body i's dofs (6 per dof) in the frame of oX_i. */
static inline void world_subspace(const rbg_model *RST m, int i, const double *RST Xo, double *RST Ji)
{
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
        return;
    }
    if (m->nvj[i] == 3) {
        /* column k = oX_i e_c (c = s_col3(k)), w = oR e_(c mod 3):
           [w; 0] for c < 3, else [p x w; w] */
        for (int k = 0; k < 3; ++k) {
            const int c = s_col3(m->jtype[i], k), a = c % 3;
            const double w[3] = {R[a], R[3 + a], R[6 + a]};
            double *Jk = Ji + 6 * k;
            if (c < 3) {
                Jk[0] = w[0]; Jk[1] = w[1]; Jk[2] = w[2];
                Jk[3] = Jk[4] = Jk[5] = 0.0;
            } else {
                cross3(pw, w, Jk);
                Jk[3] = w[0]; Jk[4] = w[1]; Jk[5] = w[2];
            }
        }
        return;
    }
    /* world axis w = oR u;  revolute J = [p x w; w], prismatic J = [w; 0],
       helical J = [p x w + h w; w] */
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
        if (m->jtype[i] == RBG_HELICAL)
            for (int e = 0; e < 3; ++e)
                Ji[e] += m->pitch[i] * w[e];
    }
}

/* ===================================================================== */
/*  Passes shared with the constrained solvers (defined in rbg.c)        */
/* ===================================================================== */

/* tau = rnea(q, v, a) (a == NULL: a = 0, i.e. b(q, v)).
 * work: X[12 nb] vel[6 nb] acc[6 nb] f[6 nb] (RBG_WORK_RNEA). */
void rbgi_rnea_core(const rbg_model *RST m, const double *RST q, const double *RST v,
                    const double *RST a, double *RST tau, double *RST work);

/* The lower triangle of M(q) (row-major nv x nv; with `mirror` the upper too), entries
 * outside the pattern untouched.  work: oX[12 nb] Yc[10 nb] J[6 nv] (RBG_WORK_CRBA);
 * on return oX holds the placements oX_i of the bodies and J the motion subspaces
 * J_r = oX_i S_i e_k of the dofs, in the frame with the world's axes and body 0's
 * origin (oX_i.p = op_i - op_0, op_0 = the translation of body 0's X_0). */
void rbgi_crba_core(const rbg_model *RST m, const double *RST q, double *RST M,
                    double *RST work, int mirror);

/* Per body: X_i = parentXi(q_i), v_i = X_i^-1 v_parent + S_i qd_i and
 * c_i = v_i x S_i qd_i  (RBDA Table 7.1, first loop). */
void rbgi_forward_velocities(const rbg_model *RST m, const double *RST q, const double *RST v,
                             double *RST X, double *RST vel, double *RST c);

/* The ABA quantities per body (RBDA Table 7.1), laid out in a workspace of
 * RBG_WORK_ABA(nb, nv) doubles: X[12 nb] vel[6 nb] c[6 nb] IA[36 nb] pA[6 nb] U[6 nb]
 * acc[6 nb] Dinv[nb] ud[nv].  For a 1-DoF joint U_i = IA_i S_i, Dinv_i = D_i^-1 and
 * ud holds D_i^-1 u_i; for a spherical or planar joint the IA_i block holds U_i and the
 * ldlt_factor of D_i (joint_step3) and ud the 3 entries D_i^-1 u_i; for a free joint
 * (S = 1) IA_i holds the ldlt_factor of D_i = IA_i and ud the 6 entries IA_i^-1 u_i. */
typedef struct rbgi_aba {
    double *X, *vel, *c, *IA, *pA, *U, *acc, *Dinv, *ud;
} rbgi_aba;

rbgi_aba rbgi_aba_layout(const rbg_model *RST m, double *RST work);

/* First forward pass: X, vel, c;  IA_i = I_i;  pA_i = v_i x* I_i v_i. */
void rbgi_aba_forward(const rbg_model *RST m, const double *RST q, const double *RST v,
                      const rbgi_aba *RST w);

/* Backward pass: U, D, u, and IA_p += X^* Ia X^-1, pA_p += X^* pa.  RBG_ESINGULAR on
 * a non-positive pivot. */
int rbgi_aba_backward(const rbg_model *RST m, const double *RST tau, const rbgi_aba *RST w);

/* Second forward pass for body i (its parent's acc done):  a' = X_i^-1 a_p + c_i,
 * qdd_i = D_i^-1 (u_i - U_i^T a'),  a_i = a' + S_i qdd_i  (a_p = -g at the root). */
void rbgi_aba_rollout(const rbg_model *RST m, int i, const rbgi_aba *RST w, double *RST ddq);

/* In place H = L^T D L (Featherstone 2005 Table 2, left) of the lower triangle over the
 * dof parents lam: D on the diagonal, L_ki below.  RBG_ESINGULAR on a pivot <= 0. */
int rbgi_ltdl_inplace(const int *RST lam, int n, double *RST H);

/* In place H = L^T L (Featherstone 2005 Table 2, right) of the lower triangle over lam. */
int rbgi_ltl_inplace(const int *RST lam, int n, double *RST H);

/* ===================================================================== */
/*  Constraint pieces shared by rbg_constrained.c, rbg_delassus.c and    */
/*  rbg_events.c                                                         */
/* ===================================================================== */

/* out = X m = (R m_v + p x R m_w, R m_w): motion, child -> parent */
static inline void act_motion(const double *RST X, const double *RST m, double *RST out)
{
    const double *R = X, *p = X + 9;
    mv3(R, m, out);
    mv3(R, m + 3, out + 3);
    cross3_add(p, out + 3, out);
}

/* out = A B for transforms (R, p): (R_A R_B, R_A p_B + p_A) */
static inline void compose(const double *RST A, const double *RST B, double *RST out)
{
    mm3(A, B, out);
    mv3(A, B + 9, out + 9);
    for (int k = 0; k < 3; ++k)
        out[9 + k] += A[9 + k];
}

/* out = A^-1 B = (R_A^T R_B, R_A^T (p_B - p_A)) */
static inline void inv_compose(const double *RST A, const double *RST B, double *RST out)
{
    const double d[3] = {B[9] - A[9], B[10] - A[10], B[11] - A[11]};
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c)
            out[3 * r + c] = A[r] * B[c] + A[3 + r] * B[3 + c] + A[6 + r] * B[6 + c];
    mtv3(A, d, out + 9);
}

static inline double norm_inf(const double *x, int n)
{
    double out = 0.0;
    for (int i = 0; i < n; ++i)
        if (fabs(x[i]) > out)
            out = fabs(x[i]);
    return out;
}

/* 1 if the proximal options are out of range: mu not positive and finite, max_iter < 1. */
static inline int bad_options(const rbg_prox_options *RST opt)
{
    return !(opt->mu > 0.0) || !isfinite(opt->mu) || opt->max_iter < 1;
}

/* The stopping test of iterate k (gen/algorithms/proximal.py): residual
 * |r|_inf with r = J ddq_k - a_c*; stop at max_iter, or when tol >= 0 and res <= tol. */
static inline int prox_stop(const rbg_prox_options *RST opt, const double *RST r, int m, int k,
                            double *RST res)
{
    *res = norm_inf(r, m);
    return k >= opt->max_iter || (opt->tol >= 0.0 && *res <= opt->tol);
}

/* The body that moves in an anchored constraint. */
static inline int moving_body(const rbg_constraints *RST c, int l)
{
    return c->body1[l] >= 0 ? c->body1[l] : c->body2[l];
}

/* rho_r = mu / weight for every row of each constraint (Sathya 2024 Remark 2). */
static inline void damping(const rbg_constraints *RST c, double mu, double *RST rho)
{
    for (int l = 0; l < c->nc; ++l)
        for (int r = c->row[l]; r < c->row[l + 1]; ++r)
            rho[r] = mu / c->weight[l];
}

/* w K^T K is a constant rigid-body inertia (Sathya 2024 eq. 24) for a frame held by
 * the world (3D or 6D) and for a 3D constraint whose frame A is the world. */
static inline int constant_inertia(const rbg_constraints *RST c, int l)
{
    return c->body2[l] < 0 || (c->body1[l] < 0 && c->size[l] == 3);
}

/* out = D_i^-1 S_i^T f (nvj entries): 1/D for a 1-DoF joint, the 3x3 factor of a
 * spherical or planar joint, the 6x6 factor of a free one */
static inline void dinv_sT(const rbg_model *RST m, int i, const rbgi_aba *RST w, const double *RST f,
                            double *RST out)
{
    if (m->jtype[i] == RBG_FREE) {
        memcpy(out, f, 6 * sizeof(double));
        ldlt_solve(w->IA + 36 * i, 6, out);
    } else if (m->nvj[i] == 3) {
        S_dot(m, i, f, out);
        ldlt_solve(joint_D3(w->IA + 36 * i), 3, out);
    } else {
        out[0] = w->Dinv[i] * S_dot1(m, i, f);
    }
}

/* f_parent += X_i^* P_i f with P_i = 1 - U_i D_i^-1 S_i^T (Sathya 2024 eq. 38); for a
 * free joint P_i = 0.  x = D_i^-1 S_i^T f (from dinv_sT). */
static inline void project_to_parent(const rbg_model *RST m, int i, const rbgi_aba *RST w,
                                     const double *RST f, const double *RST x, double *RST fp)
{
    if (m->jtype[i] == RBG_FREE)
        return;
    double t[6];
    if (m->nvj[i] == 3) {
        const double *U = joint_U3(w->IA + 36 * i);
        for (int k = 0; k < 6; ++k)
            t[k] = f[k] - (U[k] * x[0] + U[6 + k] * x[1] + U[12 + k] * x[2]);
    } else {
        for (int k = 0; k < 6; ++k)
            t[k] = f[k] - w->U[6 * i + k] * x[0];
    }
    act_force_add(w->X + 12 * i, t, fp);
}

/* out = D_i^-1 (u_i - U_i^T a) = (D_i^-1 u_i) - D_i^-1 U_i^T a (nvj entries) for a joint
 * other than free, D_i^-1 u_i read from ud (RBDA Table 7.1, third loop). */
static inline void joint_qdd(const rbg_model *RST m, int i, const rbgi_aba *RST w, const double *RST a,
                             double *RST out)
{
    const double *ud = w->ud + m->idx_v[i];
    if (m->nvj[i] == 3) {
        const double *U = joint_U3(w->IA + 36 * i);
        double x[3];
        for (int k = 0; k < 3; ++k) {
            const double *Uk = U + 6 * k;
            x[k] = Uk[0] * a[0] + Uk[1] * a[1] + Uk[2] * a[2] + Uk[3] * a[3] + Uk[4] * a[4] + Uk[5] * a[5];
        }
        ldlt_solve(joint_D3(w->IA + 36 * i), 3, x);
        for (int k = 0; k < 3; ++k)
            out[k] = ud[k] - x[k];
    } else {
        const double *Ui = w->U + 6 * i;
        out[0] = ud[0] - w->Dinv[i] * (Ui[0] * a[0] + Ui[1] * a[1] + Ui[2] * a[2]
                                       + Ui[3] * a[3] + Ui[4] * a[4] + Ui[5] * a[5]);
    }
}

/* In place H = L^T D L over the pattern (ptr, idx) of rbg_constraints, eliminating rows
 * n-1 .. 0; rows k < nneg must end with a negative pivot, the others with a positive one,
 * else RBG_ESINGULAR.  dinv[k] = 1 / D_k.  (rbg_constrained.c) */
int rbgi_ldl_factor(int n, const int *RST ptr, const int *RST idx, int nneg, double *RST H,
                    double *RST dinv);

/* oMc of side s (1 or 2) of constraint l in the frame with the world's axes at the world
 * point o, oX the body placements in that frame.  (rbg_constrained.c) */
void rbgi_frame_placement(const rbg_constraints *RST c, int l, int s, const double *RST oX,
                          const double *RST o, double *RST out);

/* Rows row[l].. of J (row-major m x nv, zeroed then filled) from the world dof subspaces
 * Jw and the frames oc1 = oMc1, oc2 = oMc2.  (rbg_constrained.c) */
void rbgi_constraint_jacobian(const rbg_model *RST m, const rbg_constraints *RST c, int l,
                              const double *RST oc1, const double *RST oc2,
                              const double *RST Jw, double *RST J);

/* K (size x 6) of an anchored constraint l on the LOCAL motion of its moving body;
 * rel = c1Mc2 is read when frame A is the world.  (rbg_constrained.c) */
void rbgi_constraint_K(const rbg_constraints *RST c, int l, const double *RST rel, double *RST K);

/* w K^T K of constraint l as a rigid-body inertia, when constant_inertia.  (rbg_constrained.c) */
void rbgi_constraint_inertia(const rbg_constraints *RST c, int l, double w, double *RST I10);
/* PV's constraint-space step at supporting body i: L += KA_i S D^-1 S^T KA_i^T (lower),
 * KA_parent^T += X^* P KA_i^T unless KAp is NULL.  (rbg_constrained.c) */
void rbgi_pv_delassus_step(const rbg_model *RST m, const rbg_constraints *RST c, int i, const rbgi_aba *RST w,
                           const double *RST KAi, double *RST T, double *RST L, double *RST KAp);
/* IA_b += w K^T K for constraint l (6x6 row-major IAb, K_l n x 6).  (rbg_constrained.c) */
void rbgi_add_constraint_inertia(const rbg_constraints *RST c, int l, double w, const double *RST Kl,
                                 double *RST IAb);

/* x <- D^-1 L^-T x on rows n-1 .. 0 of a factor from rbgi_ldl_factor (rows of `stride`
 * doubles), the right-hand side's rows from n on taken as zero.  (rbg_constrained.c) */
void rbgi_ldl_backward(int n, int stride, const int *RST ptr, const int *RST idx, const double *RST H,
                       const double *RST dinv, double *RST x);

/* x <- L^-1 x on rows from .. to-1, the rows below `from` already solved.  (rbg_constrained.c) */
void rbgi_ldl_forward(int from, int to, int stride, const int *RST ptr, const int *RST idx,
                      const double *RST H, double *RST x);

/* The joint-space terms of the KKT solvers: M(q) (lower triangle, nv x nv), b(q, v), J
 * (m x nv, LOCAL) and a_c*; scratch crba[22 nb + 6 nv], kin[30 nb].  (rbg_constrained.c) */
void rbgi_kkt_terms(const rbg_model *RST m, const rbg_constraints *RST c, const double *RST q,
                    const double *RST v, double *RST M, double *RST b, double *RST J, double *RST astar,
                    double *RST crba, double *RST kin);

/* K_mu = [[-rho, J], [J^T, M]] ((m + nv)^2, row-major) on the pattern (ptr, idx), constraint
 * row order[i] at index i (order NULL: row i), joint d at m + d.  (rbg_constrained.c) */
void rbgi_kkt_assemble(const rbg_model *RST m, const rbg_constraints *RST c, const int *RST ptr,
                       const int *RST idx, const int *RST order, const double *RST rho,
                       const double *RST M, const double *RST J, double *RST H);

/* constrainedABA's state (Sathya 2024 Alg. 1-3) in a workspace of
 * RBG_WORK_CONSTRAINED_ABA(nb, nv, m) doubles: the ABA quantities w, then oX[12 nb]
 * g[6 nb] (gravity offsets) dp[6 nb] (bias-force changes) K[6 m] (rows K, 6 per row)
 * k[m] rho[m] r[m] (residual) wr[m] (scratch).  (rbg_constrained.c) */
typedef struct rbgi_caba {
    rbgi_aba w;
    double *oX, *g, *dp, *K, *k, *rho, *r, *wr;
} rbgi_caba;

rbgi_caba rbgi_caba_layout(const rbg_model *RST m, const rbg_constraints *RST c, double *RST work);

/* Alg. 1 line 5 (eq. 29), after the first forward sweep: IA_b += K^T K / rho,
 * pA_b -= K^T (k / rho) for every constraint (K, k, rho filled).  (rbg_constrained.c) */
void rbgi_caba_augment(const rbg_constraints *RST c, const rbgi_caba *RST s);

/* After the augmented backward sweep: the roll-out over S_E, the proximal iterations from
 * lam_0 = 0 (eq. 27b, Alg. 2) with opt's stopping test, then the roll-out of the other
 * bodies (Alg. 3 lines 9-11); the root acceleration is m's gravity offset -g.
 * (rbg_constrained.c) */
void rbgi_caba_iterate(const rbg_model *RST m, const rbg_constraints *RST c, const rbg_prox_options *RST opt,
                       const rbgi_caba *RST s, double *RST ddq, double *RST lam, double *RST iterations,
                       double *RST residual);

#endif /* RBG_INTERNAL_H */
