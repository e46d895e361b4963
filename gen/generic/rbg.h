/*
 * rbg.h -- generic rigid-body dynamics in C99, the robot passed as DATA.
 *
 * This is rbdgen's hand-written baseline: one library for every robot, the kinematic
 * tree and its constants held in an `rbg_model` struct and walked by loops at run time
 * (the specialised C that rbdgen emits unrolls the same loops per robot).  It is written
 * the way Featherstone's spatial_v2 or RBDL are: LOCAL body frames, transforms applied
 * as (3x3 rotation, translation) rather than 6x6 matrices, rigid-body inertias as 10
 * parameters, 1-DoF joints special-cased (axis-aligned axes pick a column), spherical
 * and planar joints as 3-DoF blocks whose subspace picks three columns, and free joints
 * as 6-DoF blocks.  RNEA and ABA run in LOCAL frames; CRBA runs in
 * world coordinates (as Pinocchio's crba does), so each entry of M is one 6-term dot
 * product instead of a force transform per ancestor.  The analytical derivatives
 * (rbg_rnea_derivatives, rbg_aba_derivatives) run in world coordinates too (RSS 2018).
 *
 * Conventions are Pinocchio's (rbdgen docs/DESIGN.md §4):
 *   - bodies numbered parents first, parent[i] < i, -1 = world; body i moves with
 *     joint i and the joint frame is the body frame;
 *   - an SE3 (R, p) maps child to parent coordinates, x_parent = R x_child + p;
 *     the parent<-child transform of body i is placement_i * joint_i(q_i);
 *   - spatial vectors are [linear; angular]; gravity enters as a_0 = -g;
 *   - free joint: q = [x y z qx qy qz qw] (unit quaternion, not re-normalised),
 *     v = [v_lin v_ang] of the body in its LOCAL frame; spherical joint: q = [qx qy
 *     qz qw] (likewise), v = its LOCAL angular velocity; planar joint: q = [x y cos
 *     sin] in the joint frame's xy plane, v = [vx vy wz] LOCAL; continuous joint
 *     (RBG_REVOLUTE_UNB): q = [cos, sin] of the angle, used as given (so are a planar
 *     joint's cos, sin); helical joint: the angle about axis, with the translation
 *     pitch * angle along it (Pinocchio's JointModelSpherical, JointModelPlanar,
 *     JointModelHelicalUnaligned).
 *
 * Every algorithm has the form
 *     int rbg_<algo>(const rbg_model *m, const double *in0, ..., double *out0, ...,
 *                    double *work);
 * It allocates nothing, writes no globals and is thread-safe given distinct `work`
 * buffers.  `work` holds at least rbg_work_size(m, RBG_ALGO_<ALGO>) doubles (equal
 * to the RBG_WORK_<ALGO>(nbodies, nv) macro, usable for static buffers).  Matrices
 * are row-major.  Return codes: RBG_OK (0), RBG_EINPUT (an input holds NaN or inf),
 * RBG_ESINGULAR (a pivot of M, of a joint's articulated inertia or of a multi-DoF
 * joint's 3x3 or 6x6 block is not positive: the model is singular at q).
 *
 * Do not compile with -ffast-math / -ffinite-math-only: the NaN checks rely on IEEE
 * semantics.
 *
 * The constrained solvers (section "Constraints", rbg_constrained.c) take a constraint
 * set as data too (rbg_constraints, its patterns precomputed once by
 * rbg_constraints_init) and proximal options, and add the codes RBG_EMODEL (bad
 * constraint arrays), RBG_ELOOP and RBG_EUNILATERAL (see below); so do the Delassus
 * matrix and the damped Delassus inverses (section "Delassus", rbg_delassus.c), the
 * impact map and the solver with unilateral rows (section "Events", rbg_events.c).
 *
 * References: R. Featherstone, Rigid Body Dynamics Algorithms, Springer 2008 (RBDA;
 * Table 5.1 RNEA, Table 6.2 CRBA, Table 7.1 ABA, Table 2.5 spatial arithmetic);
 * R. Featherstone, Efficient Factorization of the Joint-Space Inertia Matrix for
 * Branched Kinematic Trees, IJRR 24(6) 2005 (Table 2 LTDL / LTL, §5 solves);
 * J. Carpentier, N. Mansard, Analytical Derivatives of Rigid Body Dynamics Algorithms,
 * RSS 2018 (Alg. 1, §IV);
 * J. Carpentier et al., Proximal and Sparse Resolution of Constrained Dynamic
 * Equations, RSS 2021; A. Sathya, J. Carpentier, Constrained Articulated Body Dynamics
 * Algorithms, 2024;  R. Tedrake, Underactuated Robotics notes (2012), §3.1 (unilateral
 * constraints, LCP) and §3.2 (impact map).
 */
#ifndef RBG_H
#define RBG_H

#include <stddef.h>

#ifdef __cplusplus
#define RBG_RESTRICT __restrict
extern "C" {
#else
#define RBG_RESTRICT restrict
#endif

/* ===================================================================== */
/*  Model                                                                */
/* ===================================================================== */

/* Joint kinds (rbg_model.jtype). */
enum {
    RBG_REVOLUTE = 0,       /* nq 1, nv 1: angle about axis                     */
    RBG_REVOLUTE_UNB = 1,   /* nq 2, nv 1: [cos, sin] of the angle about axis   */
    RBG_PRISMATIC = 2,      /* nq 1, nv 1: displacement along axis              */
    RBG_FREE = 3,           /* nq 7, nv 6: [x y z qx qy qz qw] / [v_lin v_ang]  */
    RBG_SPHERICAL = 4,      /* nq 4, nv 3: [qx qy qz qw] / LOCAL angular velocity */
    RBG_PLANAR = 5,         /* nq 4, nv 3: [x y cos sin] / LOCAL [vx vy wz]     */
    RBG_HELICAL = 6         /* nq 1, nv 1: angle about axis, pitch * angle along it */
};

/* Number of doubles per body in rbg_model.inertia. */
#define RBG_INERTIA_STRIDE 10

/*
 * The robot as data.  All arrays are owned by the caller and indexed by body
 * i in [0, nbodies) (or dof k in [0, nv) for dof_parent).
 *
 *   parent[i]      parent body, -1 for the world; parent[i] < i
 *   jtype[i]       RBG_REVOLUTE, RBG_REVOLUTE_UNB, RBG_PRISMATIC, RBG_FREE,
 *                  RBG_SPHERICAL, RBG_PLANAR or RBG_HELICAL
 *   axis_k[i]      k in {0,1,2} if axis i is exactly +e_k (x, y, z), else -1;
 *                  -1 for free, spherical and planar joints.  Selects the
 *                  axis-aligned fast paths.
 *   idx_q[i]       first configuration coordinate of joint i in q
 *   idx_v[i]       first velocity coordinate of joint i in v
 *   nvj[i]         number of velocity coordinates of joint i (1; 3 for spherical
 *                  and planar; 6 for free)
 *   dof_parent[k]  Featherstone 2005's expanded parent array lambda over dofs: the
 *                  dofs of a multi-DoF joint form a chain, its first dof hangs from the
 *                  last dof of the parent joint; -1 for the world; dof_parent[k] < k
 *   axis[3i..]     unit joint axis in the joint frame (unused for free, spherical and
 *                  planar joints: a planar joint moves in the xy plane of its frame)
 *   pitch[i]       translation along the axis per radian of a helical joint (read for
 *                  helical joints only; may be NULL when the model has none)
 *   plc_R[9i..]    joint placement rotation, row-major (parent <- joint at q neutral)
 *   plc_p[3i..]    joint placement translation, in the parent body frame
 *   inertia[10i..] rigid-body inertia about the BODY ORIGIN in the body frame:
 *                  m, h = m c (3), I_O = I_c + m (|c|^2 1 - c c^T) packed as
 *                  Ixx Ixy Ixz Iyy Iyz Izz   (see rbg_inertia_params)
 *   gravity        gravity vector in the world frame, e.g. (0, 0, -9.81)
 */
typedef struct rbg_model {
    int nbodies;
    int nq;
    int nv;
    const int *parent;
    const int *jtype;
    const int *axis_k;
    const int *idx_q;
    const int *idx_v;
    const int *nvj;
    const int *dof_parent;
    const double *axis;
    const double *pitch;
    const double *plc_R;
    const double *plc_p;
    const double *inertia;
    double gravity[3];
} rbg_model;

/* Status codes. */
enum {
    RBG_OK = 0,
    RBG_EINPUT = 1,         /* an input contains NaN or inf                  */
    RBG_ESINGULAR = 2,      /* non-positive pivot: singular inertia at q     */
    RBG_EALGO = 3,          /* unknown algorithm id (rbg_work_size returns 0) */
    RBG_EMODEL = 4,         /* inconsistent rbg_model (rbg_check_model) or
                               rbg_constraints (rbg_constraints_init)        */
    RBG_ELOOP = 5,          /* a loop closure between two moving bodies given
                               to constrained_aba / prox_pv / impulse         */
    RBG_EUNILATERAL = 6     /* a set with a unilateral row given to a solver of
                               bilateral constraints (use rbg_prox_lcp)       */
};

/* Algorithm ids for rbg_work_size. */
typedef enum rbg_algo {
    RBG_ALGO_RNEA = 0,
    RBG_ALGO_NLE = 1,
    RBG_ALGO_CRBA = 2,
    RBG_ALGO_LTDL = 3,
    RBG_ALGO_LTL = 4,
    RBG_ALGO_CRBA_SOLVE = 5,
    RBG_ALGO_ABA = 6,
    RBG_ALGO_PROX_LTL = 7,          /* constrained: rbg_constrained_work_size */
    RBG_ALGO_PROX_LTLS = 8,
    RBG_ALGO_CONSTRAINED_ABA = 9,
    RBG_ALGO_PROX_PV = 10,
    RBG_ALGO_DELASSUS = 11,         /* Delassus / OSIM: rbg_constrained_work_size too */
    RBG_ALGO_LTL_OSIM = 12,
    RBG_ALGO_CABA_OSIM = 13,
    RBG_ALGO_KKT_OSIM = 14,
    RBG_ALGO_PROX_LCP = 15,         /* events: rbg_constrained_work_size too */
    RBG_ALGO_IMPULSE = 16,
    RBG_ALGO_RNEA_DERIVATIVES = 17, /* rbg_work_size */
    RBG_ALGO_ABA_DERIVATIVES = 18
} rbg_algo;
#define RBG_NALGO 19

/* Workspace sizes in doubles (nb = nbodies).  Per body: a transform is 12 doubles
 * (R, p), a spatial vector 6, a rigid-body inertia 10, an articulated inertia 36. */
#define RBG_WORK_RNEA(nb, nv)       ((size_t)30 * (size_t)(nb))
#define RBG_WORK_NLE(nb, nv)        RBG_WORK_RNEA(nb, nv)
#define RBG_WORK_CRBA(nb, nv)       ((size_t)22 * (size_t)(nb) + (size_t)6 * (size_t)(nv))
#define RBG_WORK_LTDL(nb, nv)       RBG_WORK_CRBA(nb, nv)
#define RBG_WORK_LTL(nb, nv)        RBG_WORK_CRBA(nb, nv)
#define RBG_WORK_CRBA_SOLVE(nb, nv) ((size_t)(nv) * (size_t)(nv) + RBG_WORK_CRBA(nb, nv))
#define RBG_WORK_ABA(nb, nv)        ((size_t)79 * (size_t)(nb) + (size_t)(nv))
/* derivatives: per body oX, ov, oa, Ycrb, F (40) and a 6x6 Bc (36); per dof J, dVdq,
 * dAdq, dAdv (24); ABA derivatives add the nv x nv factor of M and one nv vector */
#define RBG_WORK_RNEA_DERIVATIVES(nb, nv) ((size_t)76 * (size_t)(nb) + (size_t)24 * (size_t)(nv))
#define RBG_WORK_ABA_DERIVATIVES(nb, nv) \
    ((size_t)(nv) * (size_t)(nv) + (size_t)25 * (size_t)(nv) + (size_t)76 * (size_t)(nb))

/* Doubles of workspace `algo` needs on model m; 0 for an unknown algo and for the
 * constrained solvers (see rbg_constrained_work_size). */
size_t rbg_work_size(const rbg_model *m, rbg_algo algo);

/* RBG_OK if the model's arrays are consistent (parents, kinds, indices, sizes,
 * dof_parent, axis_k, a finite pitch for each helical joint), RBG_EMODEL otherwise.
 * The algorithms assume a valid model. */
int rbg_check_model(const rbg_model *m);

/* Fill out[10] = (m, m c, I_O packed) from mass, centre of mass c and the rotational
 * inertia I_c (3x3 row-major, about the centre of mass), all in the body frame. */
void rbg_inertia_params(double mass, const double *com, const double *I_c, double *out);

/* ===================================================================== */
/*  Algorithms                                                           */
/* ===================================================================== */

/* Inverse dynamics tau = M(q) a + b(q, v)  (RBDA Table 5.1).  q[nq], v[nv], a[nv]
 * -> tau[nv]. */
int rbg_rnea(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
             const double *RBG_RESTRICT v, const double *RBG_RESTRICT a,
             double *RBG_RESTRICT tau, double *RBG_RESTRICT work);

/* Nonlinear effects b(q, v) = rnea(q, v, 0): Coriolis, centrifugal, gravity. */
int rbg_nle(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
            const double *RBG_RESTRICT v, double *RBG_RESTRICT b,
            double *RBG_RESTRICT work);

/* Joint-space inertia matrix M(q), full symmetric nv x nv (RBDA Table 6.2,
 * evaluated in world coordinates like Pinocchio's crba).
 * Entries outside the branch-induced pattern are written as 0. */
int rbg_crba(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
             double *RBG_RESTRICT M, double *RBG_RESTRICT work);

/* M(q) = L^T D L (Featherstone 2005 Table 2, left): L[nv*nv] unit lower triangular
 * (diagonal 1, zeros off the pattern), D[nv]. */
int rbg_ltdl(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
             double *RBG_RESTRICT L, double *RBG_RESTRICT D, double *RBG_RESTRICT work);

/* M(q) = L^T L (Featherstone 2005 Table 2, right): L[nv*nv] lower triangular. */
int rbg_ltl(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
            double *RBG_RESTRICT L, double *RBG_RESTRICT work);

/* x = M(q)^-1 b by CRBA, LTDL and the sparse substitutions of Featherstone 2005 §5.
 * b[nv] -> x[nv]. */
int rbg_crba_solve(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
                   const double *RBG_RESTRICT b, double *RBG_RESTRICT x,
                   double *RBG_RESTRICT work);

/* Forward dynamics ddq = M(q)^-1 (tau - b(q, v)), articulated-body algorithm
 * (RBDA Table 7.1).  q[nq], v[nv], tau[nv] -> ddq[nv]. */
int rbg_aba(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
            const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
            double *RBG_RESTRICT ddq, double *RBG_RESTRICT work);

/* Partial derivatives of inverse dynamics (Carpentier & Mansard, "Analytical
 * Derivatives of Rigid Body Dynamics Algorithms", RSS 2018, Alg. 1; Pinocchio's
 * computeRNEADerivatives): q[nq], v[nv], a[nv] -> dtau_dq, dtau_dv, M (each nv x nv,
 * ROW-major like every matrix of this library; M full and exactly symmetric) and
 * tau[nv] = rnea(q, v, a), the value they are taken at (J_i^T of the subtree forces the
 * pass sums anyway; Pinocchio's data.tau).
 * dtau_dq is taken in the tangent space of q (q + d = integrate(q, d): a free joint's
 * d is its LOCAL twist, a spherical joint's its LOCAL rotation vector, a planar
 * joint's its LOCAL planar twist), Pinocchio's convention.  One world-frame forward pass, one
 * backward pass of subtree sums and the ancestor/descendant projections: O(nb d)
 * 6-vector products, d the depth. */
int rbg_rnea_derivatives(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
                         const double *RBG_RESTRICT v, const double *RBG_RESTRICT a,
                         double *RBG_RESTRICT dtau_dq, double *RBG_RESTRICT dtau_dv,
                         double *RBG_RESTRICT M, double *RBG_RESTRICT tau, double *RBG_RESTRICT work);

/* Partial derivatives of forward dynamics (RSS 2018 §IV; Pinocchio's
 * computeABADerivatives): q[nq], v[nv], tau[nv] -> ddq_dq = -M^-1 dtau/dq,
 * ddq_dv = -M^-1 dtau/dv (both at a = aba(q, v, tau)) and Minv = M^-1 (full, exactly
 * symmetric), row-major nv x nv; ddq_dq in the tangent space as above; and
 * ddq[nv] = aba(q, v, tau), the point they are taken at (Pinocchio's data.ddq).  M^-1 and the
 * products by the sparse L^T D L of the M that the derivatives pass forms (Featherstone
 * 2005 Table 2, §5).  RBG_ESINGULAR as rbg_aba. */
int rbg_aba_derivatives(const rbg_model *RBG_RESTRICT m, const double *RBG_RESTRICT q,
                        const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
                        double *RBG_RESTRICT ddq_dq, double *RBG_RESTRICT ddq_dv,
                        double *RBG_RESTRICT Minv, double *RBG_RESTRICT ddq, double *RBG_RESTRICT work);

/* ===================================================================== */
/*  Constraints and the proximal constrained solvers (rbg_constrained.c) */
/* ===================================================================== */

/*
 * A constraint set, with the conventions of rbdgen (docs/DESIGN.md §4) = Pinocchio's
 * RigidConstraintModel with reference frame LOCAL: constraint l holds frame A (on body1,
 * at placement M1 in it) to frame B (on body2 at M2; body2 = -1: M2 is an anchor in
 * the world).  Rows are expressed in frame A's LOCAL axes:
 *   3D (size 3):  J v = lin(v_A) - c1R2 lin(v_B)       (the frame origins' velocities)
 *   6D (size 6):  J v = v_A - c1Xc2 v_B                 (spatial velocities)
 * with the desired constraint acceleration (Baumgarte; Carpentier 2021 eq. 3b)
 *   a_c* = -gamma - kd[l] J v - kp[l] e,   e = -c1Mc2.p (3D) or -log6(c1Mc2) (6D),
 * gamma the constraint acceleration at ddq = 0 without gravity (3D: the points'
 * classical accelerations; 6D: the spatial ones plus the transport term), and
 * forces in Pinocchio's sign:  M ddq + b = tau + J^T lam.  A constraint of weight w
 * gets the proximal damping rho = mu / w on its rows (Sathya 2024, Remark 2).
 *
 * The caller fills the first block (arrays per constraint l in [0, nc)):
 *   size[l]      3 or 6
 *   body1[l]     body carrying frame A, -1 for the world
 *   body2[l]     body carrying frame B, -1 for the world (at least one side moves)
 *   M1[12 l..]   frame A in body1: R (row-major, frame -> body), p
 *   M2[12 l..]   frame B in body2, or in the world when body2 = -1
 *   weight[l]    > 0
 *   kp[l], kd[l] Baumgarte gains, >= 0 (a velocity constraint J v = 0, Tedrake 2012 §2,
 *                is kp = 0, kd = its gain Kv)
 *   unilateral[l] 1 if the constraint's normal row (frame A's LOCAL z, row row[l] + 2) is
 *                one-sided (lam >= 0, Tedrake 2012 §3.1; the spec's 3D+ / 6D+), else 0;
 *                NULL: no unilateral row.  Only rbg_prox_lcp reads them; the solvers of
 *                bilateral constraints return RBG_EUNILATERAL on such a set.
 * and rbg_constraints_init fills the second block: the row offsets and the sparsity
 * patterns of the factorisations, computed once from the tree (integers, in caller
 * memory `iwork`).  A pattern (ptr, idx) lists for each row k of a matrix factored as
 * A = L^T D L (unit lower L, eliminated from the last row to the first) the columns
 * idx[ptr[k] .. ptr[k+1]) of the structurally non-zero L_ki, i < k, descending.
 */
typedef struct rbg_constraints {
    int nc;
    const int *size;
    const int *body1;
    const int *body2;
    const double *M1;
    const double *M2;
    const double *weight;
    const double *kp;
    const double *kd;
    const int *unilateral;
    /* --- set by rbg_constraints_init --- */
    int m;                  /* number of rows, sum of size                             */
    int anchored;           /* 1 if every constraint has exactly one moving side       */
    int nu;                 /* number of unilateral rows                               */
    const int *row;         /* [nc + 1] first row of each constraint; row[nc] = m       */
    const int *sup_ptr;     /* dofs whose columns of J may be non-zero, per constraint  */
    const int *sup_idx;     /*   (ascending; a 6D loop leaves out the common ancestors) */
    const int *se;          /* [nbodies] 1 if the body supports a constraint (S_E)     */
    const int *es_ptr;      /* constraints in the subtree of each body, ES(i)          */
    const int *es_idx;
    const int *kkt_ptr;     /* pattern of K_mu = [[-rho, J], [J^T, M]], m + nv rows    */
    const int *kkt_idx;     /*   (constraint rows first, Carpentier 2021 Alg. 1)        */
    const int *mmu_ptr;     /* pattern of M_mu = M + J^T rho^-1 J, nv rows             */
    const int *mmu_idx;
    const int *del_ptr;     /* pattern of the damped Delassus matrix, m rows (dense)    */
    const int *del_idx;
    const int *lcp_order;   /* [m] constraint row at each index of rbg_prox_lcp's K_mu:  */
                            /*   the nu unilateral rows, then the others, ascending     */
    const int *lcp_ptr;     /* pattern of K_mu with its constraint rows in lcp_order    */
    const int *lcp_idx;
} rbg_constraints;

/* Proximal iterations (rbdgen's gen.run options).  mu: Pinocchio's damping (> 0,
 * e.g. 1e-6; Sathya's penalty is 1/mu).  max_iter >= 1: the number of proximal steps
 * when tol < 0, else the cap.  tol >= 0: stop once |J ddq_k - a_c*|_inf <= tol. */
typedef struct rbg_prox_options {
    double mu;
    int max_iter;
    double tol;
} rbg_prox_options;

/* Ints of `iwork` rbg_constraints_init needs; 0 if a size is not 3 or 6. */
size_t rbg_constraints_iwork_size(const rbg_model *m, const rbg_constraints *c);

/* Check c against m (sizes, bodies, finite placements, positive weights, gains >= 0,
 * unilateral flags 0 or 1) and fill its structure block with pointers into iwork (which must outlive c).
 * RBG_OK or RBG_EMODEL. */
int rbg_constraints_init(const rbg_model *m, rbg_constraints *c, int *iwork);

/* Workspace sizes in doubles (nb = nbodies, nv, m = rows). */
#define RBG_WORK_PROX_LTL(nb, nv, m) \
    ((size_t)((m) + (nv)) * (size_t)((m) + (nv) + 2) + (size_t)(nv) * (size_t)((nv) + (m) + 7) \
     + (size_t)3 * (size_t)(m) + (size_t)52 * (size_t)(nb))
#define RBG_WORK_PROX_LTLS(nb, nv, m) \
    ((size_t)(nv) * (size_t)((nv) + (m) + 9) + (size_t)4 * (size_t)(m) + (size_t)62 * (size_t)(nb))
#define RBG_WORK_CONSTRAINED_ABA(nb, nv, m) \
    ((size_t)103 * (size_t)(nb) + (size_t)(nv) + (size_t)10 * (size_t)(m))
#define RBG_WORK_PROX_PV(nb, nv, m) \
    ((size_t)103 * (size_t)(nb) + (size_t)(nv) + (size_t)(m) * (size_t)((m) + 6 * (nb) + 25))

/* Doubles of workspace the constrained solver, Delassus or event algorithm `algo` needs
 * on m with the initialised set c; 0 for any other algorithm. */
size_t rbg_constrained_work_size(const rbg_model *m, const rbg_constraints *c, rbg_algo algo);

/*
 * The four proximal solvers.  Inputs q[nq], v[nv], tau[nv]; outputs ddq[nv], lam[m]
 * (Pinocchio's sign), iterations[1] (proximal steps taken, as a double; 0 without
 * constraints) and residual[1] (|J ddq - a_c*|_inf of the returned iterate).  From
 * lam_0 = 0 all four produce the same iterates of the proximal-point method
 *     M ddq_k = tau - b + J^T lam_k,    J ddq_k - a_c* = rho (lam_{k-1} - lam_k)
 * (up to rounding: the augmented-Lagrangian ones, prox_ltls and constrained_aba, add
 * J^T J / rho to the inertia and lose ~eps / (mu lambda_min(M)) relative accuracy).
 * Return RBG_OK, RBG_EINPUT (NaN / inf input, or mu <= 0, max_iter < 1),
 * RBG_ESINGULAR (a pivot of the wrong sign), RBG_ELOOP (maximal-coordinate solvers
 * given a loop between two moving bodies), RBG_EUNILATERAL (a unilateral row in the set).
 */

/* proxLTL: K_mu [-lam; ddq] = [a_c* + rho lam_{k-1}; tau - b] by the sparse L^T D L of
 * the KKT matrix, constraint rows first (Carpentier 2021 eq. 18, Alg. 1). */
int rbg_prox_ltl(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                 const rbg_prox_options *RBG_RESTRICT opt, const double *RBG_RESTRICT q,
                 const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
                 double *RBG_RESTRICT ddq, double *RBG_RESTRICT lam,
                 double *RBG_RESTRICT iterations, double *RBG_RESTRICT residual,
                 double *RBG_RESTRICT work);

/* proxLTLs: augmented Lagrangian on M_mu = M + J^T rho^-1 J (CRBA on inertias holding
 * the constant constraint terms, Sathya 2024 eq. 24; loops added to M_mu), sparse
 * L^T D L once, one solve per iteration (Sathya 2024 eq. 16). */
int rbg_prox_ltls(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                  const rbg_prox_options *RBG_RESTRICT opt, const double *RBG_RESTRICT q,
                  const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
                  double *RBG_RESTRICT ddq, double *RBG_RESTRICT lam,
                  double *RBG_RESTRICT iterations, double *RBG_RESTRICT residual,
                  double *RBG_RESTRICT work);

/* constrainedABA: ABA on the augmented Lagrangian in maximal coordinates, then reduced
 * two-sweep iterations over the supporting bodies (Sathya 2024 Alg. 1-3).  Constraints
 * relative to the world only. */
int rbg_constrained_aba(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                        const rbg_prox_options *RBG_RESTRICT opt, const double *RBG_RESTRICT q,
                        const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
                        double *RBG_RESTRICT ddq, double *RBG_RESTRICT lam,
                        double *RBG_RESTRICT iterations, double *RBG_RESTRICT residual,
                        double *RBG_RESTRICT work);

/* proxPV: Popov-Vereshchagin with proximal iterations on the damped Delassus matrix
 * J M^-1 J^T + rho built in the backward sweep (Sathya 2024 Alg. 4).  Constraints
 * relative to the world only. */
int rbg_prox_pv(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                const rbg_prox_options *RBG_RESTRICT opt, const double *RBG_RESTRICT q,
                const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
                double *RBG_RESTRICT ddq, double *RBG_RESTRICT lam,
                double *RBG_RESTRICT iterations, double *RBG_RESTRICT residual,
                double *RBG_RESTRICT work);

/* ===================================================================== */
/*  Delassus matrix and damped Delassus inverse (rbg_delassus.c)         */
/* ===================================================================== */

/*
 * Input q[nq]; output the m x m matrix (row-major, exactly symmetric) of the initialised
 * constraint set c, J the LOCAL constraint Jacobian above:
 *   rbg_delassus:                 G = J M^-1 J^T   (Pinocchio's computeDelassusMatrix)
 *   rbg_ltl_osim, rbg_caba_osim,
 *   rbg_kkt_osim:                 Lambda_mu = (J M^-1 J^T + R)^-1,  R = diag(mu / weight)
 * mu is Pinocchio's damping (> 0, e.g. 1e-6: computeDampedDelassusMatrixInverse for unit
 * weights; Sathya 2024 writes the penalty 1 / mu).  Return RBG_OK, RBG_EINPUT (NaN / inf
 * in q, or mu not positive and finite), RBG_ESINGULAR (a pivot of the wrong sign),
 * RBG_ELOOP (rbg_caba_osim given a loop between two moving bodies).  An empty set
 * (m = 0) returns RBG_OK and writes nothing.
 */
#define RBG_WORK_DELASSUS(nb, nv, m) \
    ((size_t)(nv) * (size_t)((nv) + 7 + 2 * (m)) + (size_t)22 * (size_t)(nb))
#define RBG_WORK_LTL_OSIM(nb, nv, m) \
    ((size_t)(nv) * (size_t)((nv) + 6 + (m)) + (size_t)22 * (size_t)(nb) + (size_t)(m) * (size_t)(2 * (m) + 1))
#define RBG_WORK_CABA_OSIM(nb, nv, m) \
    ((size_t)91 * (size_t)(nb) + (size_t)(nv) + (size_t)(m) * (size_t)(6 * (nb) + 13))
#define RBG_WORK_KKT_OSIM(nb, nv, m) \
    ((size_t)((m) + (nv)) * (size_t)((m) + (nv) + 1) + (size_t)(nv) * (size_t)((nv) + (m) + 6) \
     + (size_t)22 * (size_t)(nb) + (size_t)(m) * (size_t)((m) + 1))

/* G = J M^-1 J^T = Z D^-1 Z^T with M = L^T D L and z_r = L^-T j_r: CRBA, the sparse
 * LTDL and one back-substitution per row over the dofs supporting its constraint
 * (Featherstone 2005 Table 2, Table 3). */
int rbg_delassus(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                 const double *RBG_RESTRICT q, double *RBG_RESTRICT G, double *RBG_RESTRICT work);

/* LTL-OSIM: M = L^T L, Y = J L^-1, the dense Cholesky Y Y^T + R = C^T C, then
 * Lambda_mu = C^-1 C^-T (Sathya 2024 §VIII-C). */
int rbg_ltl_osim(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c, double mu,
                 const double *RBG_RESTRICT q, double *RBG_RESTRICT Lambda, double *RBG_RESTRICT work);

/* cABA-OSIM: Lambda_mu = W - W J (M + J^T W J)^-1 J^T W with W = R^-1 (Sathya 2024
 * eq. 40, Alg. 5), by one backward sweep of articulated inertias augmented with
 * W K^T K, carrying the rows W K of the constraints below each supporting body in
 * constraint space (PV-OSIM form, Alg. 4 lines 9-11); at a floating base this is eq. 41.
 * Constraints relative to the world only.  Lambda_mu = W - L_0^A cancels ~W-sized
 * terms: relative accuracy ~eps W |M^-1|, see gen/algorithms/caba_osim.py. */
int rbg_caba_osim(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c, double mu,
                  const double *RBG_RESTRICT q, double *RBG_RESTRICT Lambda, double *RBG_RESTRICT work);

/* KKT-OSIM: the sparse L^T D L of K_mu = [[-R, J], [J^T, M]] (constraint rows first,
 * Carpentier 2021 Alg. 1) leaves -Lambda_mu^-1 = Lc^T Dc Lc in the constraint block
 * (§IV-E, eq. 24); Lambda_mu = Lc^-1 (-Dc)^-1 Lc^-T. */
int rbg_kkt_osim(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c, double mu,
                 const double *RBG_RESTRICT q, double *RBG_RESTRICT Lambda, double *RBG_RESTRICT work);

/* ===================================================================== */
/*  Events: impacts and unilateral constraints (rbg_events.c)            */
/* ===================================================================== */

#define RBG_WORK_PROX_LCP(nb, nv, m) \
    ((size_t)((m) + (nv)) * (size_t)((m) + (nv) + 3) + (size_t)(nv) * (size_t)((nv) + (m) + 7) \
     + (size_t)(m) * (size_t)((m) + 8) + (size_t)52 * (size_t)(nb))
#define RBG_WORK_IMPULSE(nb, nv, m) (RBG_WORK_CONSTRAINED_ABA(nb, nv, m) + (size_t)(nv))

/*
 * proxLCP: forward dynamics with unilateral rows (Tedrake 2012 §3.1): with w = J ddq - a_c*,
 *     w_B = 0,    0 <= lam_U  _|_  w_U >= 0,    M ddq + b = tau + J^T lam,
 * U the unilateral rows (c->unilateral), B the others.  Proximal iterations on the sparse
 * L^T D L of K_mu with the rows U first (c->lcp_order; Carpentier 2021 eq. 18, Alg. 1),
 * each exact on B and one projected Gauss-Seidel sweep on U over the Schur complement
 * A_U left in the factor's leading block:
 *     lam_a <- max(0, lam_a - (A_U (lam_U - lam^_U))_a / (A_U)_aa),   a in U,
 * lam^ the bilateral proximal step.  Inputs and outputs as the four proximal solvers;
 * residual[0] = |r|_inf with r_B = J ddq - a_c* = rho (lam_{k-1} - lam_k)_B and
 * r_U = min(lam_U, w_U) (zero exactly at a solution).  Without unilateral rows the
 * iterates are rbg_prox_ltl's.  Return RBG_OK, RBG_EINPUT, RBG_ESINGULAR.
 */
int rbg_prox_lcp(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                 const rbg_prox_options *RBG_RESTRICT opt, const double *RBG_RESTRICT q,
                 const double *RBG_RESTRICT v, const double *RBG_RESTRICT tau,
                 double *RBG_RESTRICT ddq, double *RBG_RESTRICT lam,
                 double *RBG_RESTRICT iterations, double *RBG_RESTRICT residual,
                 double *RBG_RESTRICT work);

/*
 * The impact map (Tedrake 2012 §3.2): v_plus[nv] and impulse[m] with
 *     M (v+ - v-) = J^T impulse,    J v+ = -e J v-,
 * e = restitution in [0, 1] (0: plastic impact).  Solved as constrained dynamics with no
 * torque, no velocity-product terms and no gravity, K dv_b = k = -(1 + e) K v-_b per
 * constraint, by rbg_constrained_aba's sweeps and proximal iterations (Sathya 2024
 * Alg. 1-3); from lam_0 = 0 the iterates converge to the minimum-norm impulse.
 * iterations[1], residual[1] = |J v+ + e J v-|_inf as for the proximal solvers (the
 * augmented-Lagrangian rounding ~eps / (mu lambda_min(M)) applies: mu = 1e-4 gives
 * ~1e-11).  Constraints relative to the world only.  Return RBG_OK, RBG_EINPUT (NaN /
 * inf input, options out of range, e outside [0, 1]), RBG_ESINGULAR, RBG_ELOOP,
 * RBG_EUNILATERAL.
 */
int rbg_impulse(const rbg_model *RBG_RESTRICT m, const rbg_constraints *RBG_RESTRICT c,
                const rbg_prox_options *RBG_RESTRICT opt, double restitution,
                const double *RBG_RESTRICT q, const double *RBG_RESTRICT v_minus,
                double *RBG_RESTRICT v_plus, double *RBG_RESTRICT impulse,
                double *RBG_RESTRICT iterations, double *RBG_RESTRICT residual,
                double *RBG_RESTRICT work);

#ifdef __cplusplus
}
#endif

#endif /* RBG_H */
