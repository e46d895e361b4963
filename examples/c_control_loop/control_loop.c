/* control_loop.c -- a 1 kHz control loop in simulated time on rbdgen kernels, plain C99.
 *
 *   panda   gravity-compensated PD tracking a smooth reference: tau = g(q) + Kp (q_ref - q)
 *           + Kd (v_ref - v) with g(q) = rbd_panda_rnea(q, 0, 0); the arm is simulated
 *           with its forward dynamics rbd_panda_aba.
 *   solo12  whole-body hold of the standing posture with the four feet held in place
 *           (3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT): a PID on the 12 joints (the
 *           integral finds the torque that carries the weight), simulated with the
 *           constrained forward dynamics rbd_solo12_feet.
 *
 * Both integrate with semi-implicit Euler at dt = 1 ms (v += dt ddq, then q (+)= dt v; the
 * free-flyer of solo12 moves by the SE(3) exponential of its LOCAL twist, as Pinocchio's
 * integrate).  The PD gains come from the kernels too: joint j gets Kp = w^2 m_j,
 * Kd = 2 w m_j (a critically damped oscillator at w = 50 rad/s) where m_j = 1 / (FD(q0, 0,
 * e_j) - FD(q0, 0, 0))_j is the inertia it sees when pushed alone.
 *
 * Each step is timed with clock_gettime(CLOCK_MONOTONIC): "control" is the controller
 * (for panda: rnea + PD), "step" the whole tick (control + forward dynamics + integration).
 * The loop runs as fast as it can; the 1 ms budget is what a real-time tick would allow.
 *
 * Usage: control_loop [SECONDS]   (simulated seconds per robot, default 5)
 */
#define _POSIX_C_SOURCE 199309L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rbd_panda_aba.h"
#include "rbd_panda_rnea.h"
#include "rbd_solo12_feet.h"

#define SOLO12_FD rbd_solo12_feet
#define SOLO12_(X) RBD_SOLO12_FEET_##X

#define PI 3.14159265358979323846
#define DT 1e-3              /* s: 1 kHz */
#define BUDGET_US 1000.0     /* per step */
#define OMEGA 50.0           /* rad/s: PD natural frequency */
#define MAX_NV 18

typedef int (*forward_dynamics)(const double *q, const double *v, const double *tau, double *ddq);

/* ---- the two plants, one signature ------------------------------------------------------ */

static int panda_fd(const double *q, const double *v, const double *tau, double *ddq)
{
    double work[RBD_PANDA_ABA_WORK_SIZE + 1];
    return rbd_panda_aba(q, v, tau, ddq, work);
}

static int solo12_fd(const double *q, const double *v, const double *tau, double *ddq)
{
    double lam[SOLO12_(M)], iterations, residual, work[SOLO12_(WORK_SIZE) + 1];
    return SOLO12_FD(q, v, tau, ddq, lam, &iterations, &residual, work);
}

/* ---- gains ------------------------------------------------------------------------------ */

/* Kp, Kd of the joints first..nv-1 at q (FD is affine in tau: column j of its slope is
 * FD(q, 0, e_j) - FD(q, 0, 0)). */
static int pd_gains(forward_dynamics fd, const double *q, int nv, int first, double *kp, double *kd)
{
    double zero[MAX_NV] = {0}, tau[MAX_NV] = {0}, a0[MAX_NV], a[MAX_NV];
    int j, rc = fd(q, zero, zero, a0);
    for (j = first; j < nv && rc == RBDGEN_OK; ++j) {
        double m;
        tau[j] = 1.0;
        rc = fd(q, zero, tau, a);
        tau[j] = 0.0;
        m = 1.0 / (a[j] - a0[j]);
        kp[j] = OMEGA * OMEGA * m;
        kd[j] = 2.0 * OMEGA * m;
    }
    return rc;
}

/* ---- timing ----------------------------------------------------------------------------- */

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* nearest-rank percentile of sorted t[0..n-1] */
static double percentile(const double *t, int n, double p)
{
    int i = (int)ceil(p / 100.0 * n) - 1;
    return t[i < 0 ? 0 : i];
}

static void report_times(const char *what, double *t, int n)
{
    qsort(t, n, sizeof *t, by_value);
    printf("  %-7s [us]  p50 %8.3f  p90 %8.3f  p99 %8.3f  max %8.3f\n", what,
           percentile(t, n, 50), percentile(t, n, 90), percentile(t, n, 99), t[n - 1]);
}

/* after report_times(): t is sorted */
static void report_budget(const double *t, int n)
{
    int k, over = 0;
    for (k = 0; k < n; ++k) over += t[k] > BUDGET_US;
    printf("  budget  %.0f us per step: margin %.1f us at p99, %.1f us at max (%.2f %% used); %d overruns\n",
           BUDGET_US, BUDGET_US - percentile(t, n, 99), BUDGET_US - t[n - 1], 100.0 * t[n - 1] / BUDGET_US, over);
}

/* ---- free-flyer integration --------------------------------------------------------------- */

static void cross(const double *a, const double *b, double *c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

/* [x y z qx qy qz qw] (+) dv, dv = [u; w] the LOCAL twist times dt: oM <- oM exp6(dv), i.e.
 * p += R V(w) u with V = I + (1 - cos th)/th^2 [w]x + (th - sin th)/th^3 [w]x^2, th = |w|,
 * and quat <- quat (x) (sin(th/2) w/th, cos(th/2)), renormalised. */
static void integrate_free_flyer(double *q, const double *dv)
{
    const double *u = dv, *w = dv + 3;
    double *p = q, *r = q + 3;     /* r = (x, y, z, w) */
    double th2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2], th = sqrt(th2);
    double a, b, k, c = cos(0.5 * th), wu[3], wwu[3], t[3], rt[3], rrt[3], n[4], norm;
    int i;
    if (th < 1e-4) {               /* Taylor: cancellation-free */
        a = 0.5 - th2 / 24.0;
        b = 1.0 / 6.0 - th2 / 120.0;
        k = 0.5 - th2 / 48.0;
    } else {
        a = (1.0 - cos(th)) / th2;
        b = (th - sin(th)) / (th2 * th);
        k = sin(0.5 * th) / th;
    }
    cross(w, u, wu);
    cross(w, wu, wwu);
    for (i = 0; i < 3; ++i) t[i] = u[i] + a * wu[i] + b * wwu[i];
    cross(r, t, rt);               /* R t = t + 2 r_w (r x t) + 2 r x (r x t) */
    cross(r, rt, rrt);
    for (i = 0; i < 3; ++i) p[i] += t[i] + 2.0 * r[3] * rt[i] + 2.0 * rrt[i];
    n[0] = r[3] * k * w[0] + c * r[0] + k * (r[1] * w[2] - r[2] * w[1]);
    n[1] = r[3] * k * w[1] + c * r[1] + k * (r[2] * w[0] - r[0] * w[2]);
    n[2] = r[3] * k * w[2] + c * r[2] + k * (r[0] * w[1] - r[1] * w[0]);
    n[3] = r[3] * c - k * (r[0] * w[0] + r[1] * w[1] + r[2] * w[2]);
    norm = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2] + n[3] * n[3]);
    for (i = 0; i < 4; ++i) r[i] = n[i] / norm;
}

/* ---- panda: tracking -------------------------------------------------------------------- */

static int panda(int steps, double *t_control, double *t_step)
{
    enum { NV = RBD_PANDA_ABA_NV };
    static const double home[NV] = {0.0, -PI / 4, 0.0, -3 * PI / 4, 0.0, PI / 2, PI / 4};
    const double amp = 0.25, freq = PI;        /* q_ref = home + amp (1 - cos(freq t)) */
    double q[NV], v[NV] = {0}, zero[NV] = {0}, g[NV], tau[NV], ddq[NV], kp[NV], kd[NV];
    double work[RBD_PANDA_RNEA_WORK_SIZE + 1], sum_sq = 0.0, worst = 0.0, last = 0.0;
    int k, j, rc;

    memcpy(q, home, sizeof q);
    rc = pd_gains(panda_fd, home, NV, 0, kp, kd);
    for (k = 0; k < steps && rc == RBDGEN_OK; ++k) {
        double t = k * DT, c = cos(freq * t), s = sin(freq * t), t0, t1, t2;
        last = 0.0;
        t0 = now_us();
        rc = rbd_panda_rnea(q, zero, zero, g, work);           /* g(q) */
        for (j = 0; j < NV; ++j) {
            double e = home[j] + amp * (1.0 - c) - q[j];
            tau[j] = g[j] + kp[j] * e + kd[j] * (amp * freq * s - v[j]);
            sum_sq += e * e;
            last = fmax(last, fabs(e));
        }
        t1 = now_us();
        rc = rc ? rc : panda_fd(q, v, tau, ddq);
        for (j = 0; j < NV; ++j) {
            v[j] += DT * ddq[j];
            q[j] += DT * v[j];
        }
        t2 = now_us();
        t_control[k] = t1 - t0;
        t_step[k] = t2 - t0;
        worst = fmax(worst, last);
    }
    if (rc != RBDGEN_OK) return rc;
    printf("panda: gravity-compensated PD (rbd_panda_rnea) on forward dynamics (rbd_panda_aba), "
           "dt = 1 ms, %d steps\n", steps);
    report_times("control", t_control, steps);
    report_times("step", t_step, steps);
    report_budget(t_step, steps);
    printf("  tracking error [rad]: rms %.2e  max %.2e  final %.2e  (q_ref = home + %.2f (1 - cos(pi t)))\n",
           sqrt(sum_sq / (steps * NV)), worst, last, amp);
    return RBDGEN_OK;
}

/* ---- solo12: whole-body hold ------------------------------------------------------------- */

static int solo12(int steps, double *t_control, double *t_step)
{
    enum { NQ = SOLO12_(NQ), NV = SOLO12_(NV), NJ = NV - 6 };
    /* example-robot-data's SRDF state 'standing': base at 0.235 m, legs HAA, HFE, KFE */
    static const double q0[NQ] = {0.0, 0.0, 0.235, 0.0, 0.0, 0.0, 1.0,
                                  0.1, 0.8, -1.6, -0.1, 0.8, -1.6, 0.1, -0.8, 1.6, -0.1, -0.8, 1.6};
    const double t_integral = 0.2;            /* s: integral time of the PID */
    double q[NQ], v[NV] = {0}, tau[NV] = {0}, ddq[NV], dv[6], kp[NV], kd[NV];
    double integral[NJ] = {0};
    double joint_max = 0.0, joint = 0.0, base_max = 0.0, base = 0.0, tilt_max = 0.0, tilt = 0.0;
    int k, j, rc;

    memcpy(q, q0, sizeof q);
    rc = pd_gains(solo12_fd, q0, NV, 6, kp, kd);
    for (k = 0; k < steps && rc == RBDGEN_OK; ++k) {
        double t0, t1, t2;
        t0 = now_us();
        for (j = 0; j < NJ; ++j) {
            double e = q0[7 + j] - q[7 + j];
            integral[j] += DT * e;
            tau[6 + j] = kp[6 + j] * (e + integral[j] / t_integral) - kd[6 + j] * v[6 + j];
        }
        t1 = now_us();
        rc = solo12_fd(q, v, tau, ddq);
        for (j = 0; j < NV; ++j) v[j] += DT * ddq[j];
        for (j = 0; j < 6; ++j) dv[j] = DT * v[j];
        integrate_free_flyer(q, dv);
        for (j = 0; j < NJ; ++j) q[7 + j] += DT * v[6 + j];
        t2 = now_us();
        t_control[k] = t1 - t0;
        t_step[k] = t2 - t0;

        joint = 0.0;
        for (j = 0; j < NJ; ++j) joint = fmax(joint, fabs(q0[7 + j] - q[7 + j]));
        base = sqrt((q[0] - q0[0]) * (q[0] - q0[0]) + (q[1] - q0[1]) * (q[1] - q0[1]) + (q[2] - q0[2]) * (q[2] - q0[2]));
        tilt = 2.0 * atan2(sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5]), fabs(q[6]));  /* q0 is upright */
        joint_max = fmax(joint_max, joint);
        base_max = fmax(base_max, base);
        tilt_max = fmax(tilt_max, tilt);
    }
    if (rc != RBDGEN_OK) return rc;
    printf("solo12: PID hold of 'standing', four feet held (constrained_aba, 3D:*_FOOT), dt = 1 ms, %d steps\n", steps);
    report_times("control", t_control, steps);
    report_times("step", t_step, steps);
    report_budget(t_step, steps);
    printf("  hold error: joints [rad] max %.2e final %.2e;  base [m] max %.2e final %.2e;  "
           "tilt [rad] max %.2e final %.2e\n", joint_max, joint, base_max, base, tilt_max, tilt);
    return RBDGEN_OK;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    int steps = (int)floor(seconds / DT + 0.5), rc;
    double *t_control, *t_step;
    if (steps < 1) {
        fprintf(stderr, "usage: %s [SECONDS]   (simulated seconds, at least %g)\n", argv[0], DT);
        return 2;
    }
    t_control = malloc(sizeof(double) * steps);
    t_step = malloc(sizeof(double) * steps);
    if (!t_control || !t_step) return 2;
    rc = panda(steps, t_control, t_step);
    if (rc == RBDGEN_OK) rc = solo12(steps, t_control, t_step);
    free(t_control);
    free(t_step);
    if (rc != RBDGEN_OK) fprintf(stderr, "control_loop: a kernel returned %d\n", rc);
    return rc == RBDGEN_OK ? 0 : 1;
}
