/*
 * pin_shim.cpp -- Pinocchio's C++ API behind a flat C ABI, for rbdgen's benchmarks.
 *
 * Part of rbdgen (gen/bench).  Built by gen/bench/pinshim.py; see that module for
 * why the model arrives as a Boost text archive and why everything here is compiled
 * header-only with the same flags as rbdgen's own C.
 *
 * The file is compiled several times, once per PINSHIM_PART_* macro, so the slow
 * template instantiations build in parallel:
 *
 *   PINSHIM_PART_CORE         create/destroy (model from a text archive), sizes,
 *                             constraint set-up, output fetchers
 *   PINSHIM_PART_RNEA         rnea, nonLinearEffects
 *   PINSHIM_PART_CRBA         crba, crba + cholesky decompose/solve
 *   PINSHIM_PART_ABA          aba, computeMinverse
 *   PINSHIM_PART_CONSTRAINED  constraintDynamics
 *   PINSHIM_PART_CONTACT      contactABA, lcaba, computeDampedDelassusMatrixInverse
 *                             (apart: 116 s of g++ at -O0 against constraintDynamics'
 *                             41 s, which the constrained solvers' benchmarks need alone)
 *   PINSHIM_PART_IMPULSE      impulseDynamics
 *   PINSHIM_PART_DERIVATIVES  computeRNEADerivatives, computeABADerivatives
 *   PINSHIM_PART_CONSTRAINED_DERIVATIVES
 *                             constraintDynamics + computeConstraintDynamicsDerivatives,
 *                             impulseDynamics + computeImpulseDynamicsDerivatives
 *   PINSHIM_PART_SECOND_ORDER ComputeRNEASecondOrderDerivatives
 *
 * Timed entry points do exactly Pinocchio's call; results stay in pinocchio::Data
 * unless an output pointer is non-NULL, in which case they are copied out (crba:
 * Pinocchio fills the upper triangle; the copy is the full symmetric matrix,
 * row-major).  The harness times with NULL outputs and checks with buffers.
 *
 * Not offered: pinocchio::constrainedABA and pinocchio::pv (pv.hpp) do not compile
 * in pin 4.1 -- pv.hxx uses RigidConstraintData::constraint_acceleration_error, a
 * member that does not exist (it is contact_acceleration_error).
 *
 * Every entry point returns 0 on success and a non-zero code on failure (never
 * throws across the C boundary); pinshim_last_error() gives the message.
 */
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "pinocchio/multibody.hpp"
#include "pinocchio/algorithm/proximal.hpp"
#include "pinocchio/constraints.hpp"

#if defined(PINSHIM_PART_CORE)
#include "pinocchio/algorithm/constrained-dynamics.hpp"
#include "pinocchio/algorithm/delassus.hpp"
#include "pinocchio/serialization.hpp"
#endif
#if defined(PINSHIM_PART_RNEA)
#include "pinocchio/algorithm/rnea.hpp"
#endif
#if defined(PINSHIM_PART_CRBA)
#include "pinocchio/algorithm/cholesky.hpp"
#include "pinocchio/algorithm/crba.hpp"
#endif
#if defined(PINSHIM_PART_ABA)
#include "pinocchio/algorithm/aba.hpp"
#endif
#if defined(PINSHIM_PART_CONSTRAINED) || defined(PINSHIM_PART_CONTACT)
#include "pinocchio/algorithm/constrained-dynamics.hpp"
#endif
#if defined(PINSHIM_PART_CONTACT)
#include "pinocchio/algorithm/delassus.hpp"
#include "pinocchio/algorithm/loop-constrained-aba.hpp"
#endif
#if defined(PINSHIM_PART_IMPULSE)
#include "pinocchio/algorithm/impulse-dynamics.hpp"
#endif
#if defined(PINSHIM_PART_DERIVATIVES)
#include "pinocchio/algorithm/rnea-derivatives.hpp"
#include "pinocchio/algorithm/aba-derivatives.hpp"
#endif
#if defined(PINSHIM_PART_SECOND_ORDER)
#include "pinocchio/algorithm/rnea-second-order-derivatives.hpp"
#endif
#if defined(PINSHIM_PART_CONSTRAINED_DERIVATIVES)
#include "pinocchio/algorithm/constrained-dynamics.hpp"
#include "pinocchio/algorithm/constrained-dynamics-derivatives.hpp"
#include "pinocchio/algorithm/impulse-dynamics.hpp"
#include "pinocchio/algorithm/impulse-dynamics-derivatives.hpp"
#endif

namespace pin = pinocchio;

/* ===================================================================== */
/*  The handle (identical in every part: one definition)                 */
/* ===================================================================== */

typedef pin::RigidConstraintModel CModel;
typedef pin::RigidConstraintData CData;
#if defined(PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION)
/* Library mode (gen/bench/pinshim.py, the tests' shim): the argument types of the wheel's
 * explicit instantiations (libpinocchio_default.so), so that the headers' extern template
 * declarations apply and g++ does not instantiate the algorithms again: Pinocchio's own
 * constraint vectors (std::allocator), Ref<const VectorXd> for rnea, crba, aba and their
 * derivatives, VectorXd for the constrained and impulse dynamics (a copy per call). */
typedef pin::RigidConstraintModelVector CModels;
typedef pin::RigidConstraintDataVector CDatas;
#else
typedef std::vector<CModel, Eigen::aligned_allocator<CModel>> CModels;
typedef std::vector<CData, Eigen::aligned_allocator<CData>> CDatas;
#endif

/* One Data (and one constraint-data vector) per algorithm family: each family's
 * init routine shapes its Data, so sharing one could let one family disturb another. */
enum { FAM_CD = 0, FAM_CABA = 1, FAM_LCABA = 2, FAM_DEL = 3, FAM_IMP = 4, FAM_CDD = 5, FAM_IMPD = 6, NFAM = 7 };

struct pinshim {
    pin::Model model;
    std::unique_ptr<pin::Data> data;                 /* unconstrained algorithms   */
    CModels cmodels;
    std::unique_ptr<pin::Data> cdata_fam[NFAM];      /* constrained, per family    */
    CDatas cdatas[NFAM];
    pin::ProximalSettings settings[NFAM];
    double mu = 1e-6;                                /* Pinocchio's proximal damping */
    int max_iter = 10;
    double accuracy = 1e-12;
    int m = 0;                                       /* total constraint dimension  */
    double restitution = 0.0;                        /* impulseDynamics' r_coeff    */
    bool constraints_ready = false;
    Eigen::MatrixXd delassus_inv;
};

extern "C" {
const char *pinshim_last_error(void);
}

void pinshim_set_error(const char *msg);

#define PINSHIM_TRY try {
#define PINSHIM_CATCH                                                           \
    }                                                                           \
    catch (const std::exception &e) { pinshim_set_error(e.what()); return 1; } \
    catch (...) { pinshim_set_error("unknown C++ exception"); return 1; }

#if defined(PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION)   /* library mode: see CModels */
struct CVec : Eigen::Ref<const Eigen::VectorXd> {
    CVec(const double *p, Eigen::Index n) : Eigen::Ref<const Eigen::VectorXd>(Eigen::Map<const Eigen::VectorXd>(p, n)) {}
};
struct KVec : Eigen::VectorXd {
    KVec(const double *p, Eigen::Index n) : Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(p, n)) {}
};
#else
typedef Eigen::Map<const Eigen::VectorXd> CVec;
typedef Eigen::Map<const Eigen::VectorXd> KVec;   /* the constrained and impulse dynamics' vectors */
#endif

/* ===================================================================== */
/*  Core: model, sizes, constraints, fetchers                            */
/* ===================================================================== */
#if defined(PINSHIM_PART_CORE)

static thread_local std::string g_error;

void pinshim_set_error(const char *msg) { g_error = msg ? msg : ""; }

extern "C" {

const char *pinshim_last_error(void) { return g_error.c_str(); }

/* A handle for the model in `archive` (pinocchio::Model::saveToString, i.e. a Boost
 * text archive, `len` bytes).  NULL on failure (see pinshim_last_error). */
pinshim *pinshim_create(const char *archive, size_t len)
{
    try {
        std::unique_ptr<pinshim> s(new pinshim());
        s->model.loadFromString(std::string(archive, len));
        s->data.reset(new pin::Data(s->model));
        return s.release();
    } catch (const std::exception &e) {
        pinshim_set_error(e.what());
    } catch (...) {
        pinshim_set_error("unknown C++ exception while loading the model");
    }
    return nullptr;
}

void pinshim_destroy(pinshim *s) { delete s; }

int pinshim_nq(const pinshim *s) { return s->model.nq; }
int pinshim_nv(const pinshim *s) { return s->model.nv; }
int pinshim_njoints(const pinshim *s) { return (int)s->model.njoints; }
int pinshim_m(const pinshim *s) { return s->m; }

/* EIGEN_MAX_ALIGN_BYTES of this build (16 for baseline x86-64, 32 AVX, 64 AVX-512):
 * reported so a reader can see which ABI the shim was compiled for. */
int pinshim_eigen_align(void) { return EIGEN_MAX_ALIGN_BYTES; }

/* Append a constraint: type 3 (CONTACT_3D) or 6 (CONTACT_6D) between frame 1,
 * rigidly attached to joint1 at placement M1, and frame 2 on joint2 at M2 (joint2 = 0:
 * the world).  M = 12 doubles: rotation row-major, then translation.  Expressed in
 * frame 1's LOCAL axes (rbdgen docs/DESIGN.md §4).  kp, kd: Baumgarte gains. */
int pinshim_add_constraint(pinshim *s, int type, int joint1, const double *M1, int joint2,
                           const double *M2, double kp, double kd)
{
    PINSHIM_TRY
    if (type != 3 && type != 6) {
        pinshim_set_error("constraint type must be 3 or 6");
        return 2;
    }
    auto se3 = [](const double *M) {
        Eigen::Matrix3d R;
        R << M[0], M[1], M[2], M[3], M[4], M[5], M[6], M[7], M[8];
        return pin::SE3(R, Eigen::Vector3d(M[9], M[10], M[11]));
    };
    CModel cm(type == 3 ? pin::CONTACT_3D : pin::CONTACT_6D, s->model, (pin::JointIndex)joint1,
              se3(M1), (pin::JointIndex)joint2, se3(M2), pin::LOCAL);
    cm.baumgarte_corrector_parameters().Kp = kp;
    cm.baumgarte_corrector_parameters().Kd = kd;
    s->cmodels.push_back(cm);
    s->constraints_ready = false;
    return 0;
    PINSHIM_CATCH
}

/* Allocate and initialise every constrained family for the constraints added so far.
 * mu: Pinocchio's proximal damping (1e-6 in its docs); max_iter, accuracy: its
 * ProximalSettings.  Returns 0; pinshim_m() is then the total constraint dimension. */
int pinshim_init_constraints(pinshim *s, double mu, int max_iter, double accuracy)
{
    PINSHIM_TRY
    s->mu = mu;
    s->max_iter = max_iter;
    s->accuracy = accuracy;
    s->m = 0;
    for (const CModel &cm : s->cmodels)
        s->m += (int)cm.residualSize();
    for (int f = 0; f < NFAM; ++f) {
        s->cdata_fam[f].reset(new pin::Data(s->model));
        s->cdatas[f].clear();
        for (const CModel &cm : s->cmodels)
            s->cdatas[f].push_back(CData(cm));
        s->settings[f] = pin::ProximalSettings(accuracy, mu, max_iter);
    }
    /* contactABA's settings.mu is a penalty (a mass added at the contact: Sathya's
     * mu_S = 1 / mu); every other family takes Pinocchio's damping mu. */
    s->settings[FAM_CABA] = pin::ProximalSettings(accuracy, 1.0 / mu, max_iter);
    pin::initConstraintDynamics(s->model, *s->cdata_fam[FAM_CD], s->cmodels, s->cdatas[FAM_CD]);
    pin::initConstraintDynamics(s->model, *s->cdata_fam[FAM_CABA], s->cmodels, s->cdatas[FAM_CABA]);
    pin::initConstraintDynamics(s->model, *s->cdata_fam[FAM_IMP], s->cmodels, s->cdatas[FAM_IMP]);
    pin::initConstraintDynamics(s->model, *s->cdata_fam[FAM_CDD], s->cmodels, s->cdatas[FAM_CDD]);
    pin::initConstraintDynamics(s->model, *s->cdata_fam[FAM_IMPD], s->cmodels, s->cdatas[FAM_IMPD]);
    pin::computeJointMinimalOrdering(s->model, *s->cdata_fam[FAM_LCABA], s->cmodels);
    pin::initPvDelassus(s->model, *s->cdata_fam[FAM_DEL], s->cmodels);
    s->delassus_inv = Eigen::MatrixXd::Zero(s->m, s->m);
    s->constraints_ready = true;
    return 0;
    PINSHIM_CATCH
}

/* The restitution coefficient of impulseDynamics, in [0, 1] (0: plastic impact). */
int pinshim_set_restitution(pinshim *s, double r_coeff)
{
    if (!(r_coeff >= 0.0 && r_coeff <= 1.0)) {
        pinshim_set_error("the restitution coefficient must lie in [0, 1]");
        return 2;
    }
    s->restitution = r_coeff;
    return 0;
}

/* Proximal iterations of the last call of a constrained family (0..6: constraintDynamics,
 * contactABA, lcaba, delassus, impulse, constraintDynamics + derivatives, impulse +
 * derivatives). */
int pinshim_last_iterations(const pinshim *s, int family)
{
    return (family >= 0 && family < NFAM) ? s->settings[family].iter : -1;
}

/* --- fetchers: copy results of the last call out of pinocchio::Data --------------- */

static void copy_vec(const Eigen::VectorXd &x, double *out) { std::memcpy(out, x.data(), sizeof(double) * x.size()); }

/* Full symmetric n x n, row-major, from Pinocchio's upper triangle. */
extern "C++" {   /* templates inside the extern "C" block */
template <typename Mat>
static void copy_sym_upper(const Eigen::MatrixBase<Mat> &M, double *out)
{
    const Eigen::Index n = M.rows();
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j)
            out[i * n + j] = (j >= i) ? M(i, j) : M(j, i);
}

/* Any rows x cols matrix (Pinocchio stores some derivatives row-major), row-major. */
template <typename Mat>
static void copy_mat(const Eigen::MatrixBase<Mat> &A, double *out)
{
    for (Eigen::Index i = 0; i < A.rows(); ++i)
        for (Eigen::Index j = 0; j < A.cols(); ++j)
            out[i * A.cols() + j] = A(i, j);
}
}  /* extern "C++" */

void pinshim_detail_fetch_tau(const pinshim *s, double *out) { copy_vec(s->data->tau, out); }
void pinshim_detail_fetch_nle(const pinshim *s, double *out) { copy_vec(s->data->nle, out); }
void pinshim_detail_fetch_M(const pinshim *s, double *out) { copy_sym_upper(s->data->M, out); }
void pinshim_detail_fetch_ddq(const pinshim *s, double *out) { copy_vec(s->data->ddq, out); }
void pinshim_detail_fetch_Minv(const pinshim *s, double *out) { copy_sym_upper(s->data->Minv, out); }

void pinshim_detail_fetch_constrained(const pinshim *s, int family, double *ddq, double *lam)
{
    const pin::Data &d = *s->cdata_fam[family];
    if (ddq)
        copy_vec(d.ddq, ddq);
    if (!lam)
        return;
    if (family == FAM_CD) {
        copy_vec(d.lambda_c, lam);      /* M ddq + b = tau + J^T lambda_c */
        return;
    }
    /* contactABA and lcaba accumulate the penalty forces mu * (acceleration error) in
     * cdata.contact_force (frame 1, LOCAL) and add them to the bias forces of joint 1,
     * i.e. they act on the robot as -contact_force: lambda = -contact_force. */
    int k = 0;
    for (size_t c = 0; c < s->cmodels.size(); ++c) {
        const CData &cd = s->cdatas[family][c];
        const int sz = (int)s->cmodels[c].residualSize();
        const Eigen::Matrix<double, 6, 1> f = cd.contact_force.toVector();
        for (int i = 0; i < sz; ++i)
            lam[k + i] = -f[i];
        k += sz;
    }
}

/* computeDampedDelassusMatrixInverse in pin 4.1 fills only the blocks on and above the
 * diagonal (those below keep stale values): the copy mirrors the upper triangle. */
void pinshim_detail_fetch_delassus_inv(const pinshim *s, double *out) { copy_sym_upper(s->delassus_inv, out); }

/* impulseDynamics' results: v+ = data.dq_after, the impulse data.impulse_c
 * (M (v+ - v-) = J^T impulse). */
void pinshim_detail_fetch_impulse(const pinshim *s, double *v_plus, double *impulse)
{
    const pin::Data &d = *s->cdata_fam[FAM_IMP];
    if (v_plus)
        copy_vec(d.dq_after, v_plus);
    if (impulse)
        copy_vec(d.impulse_c, impulse);
}

/* Derivative outputs (row-major): rnea_derivatives (dtau_dq, dtau_dv, M, tau),
 * aba_derivatives (ddq_dq, ddq_dv, Minv, ddq): the value is the data.tau / data.ddq the
 * derivatives are taken at.  M and Minv are filled by Pinocchio on and above the
 * diagonal only: the copy mirrors the upper triangle.  Any pointer may be NULL. */
void pinshim_detail_fetch_derivatives(const pinshim *s, int aba, double *dq, double *dv, double *sym,
                                      double *value)
{
    const pin::Data &d = *s->data;
    if (aba) {
        if (dq) copy_mat(d.ddq_dq, dq);
        if (dv) copy_mat(d.ddq_dv, dv);
        if (sym) copy_sym_upper(d.Minv, sym);
        if (value) copy_vec(d.ddq, value);
    } else {
        if (dq) copy_mat(d.dtau_dq, dq);
        if (dv) copy_mat(d.dtau_dv, dv);
        if (sym) copy_sym_upper(d.M, sym);
        if (value) copy_vec(d.tau, value);
    }
}

/* computeConstraintDynamicsDerivatives' outputs (family FAM_CDD) or, impulse != 0,
 * computeImpulseDynamicsDerivatives' (FAM_IMPD: its ddq_dv is dv+/dv- - I; the copy adds
 * I so that it is rbdgen's dvplus_dv).  out: ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv,
 * dlam_dtau, ddq, lam (data.ddq, data.lambda_c of constraintDynamics); impulse:
 * dvplus_dq, dvplus_dv, dimpulse_dq, dimpulse_dv, v_plus, impulse (data.dq_after,
 * data.impulse_c of impulseDynamics); NULL skips. */
void pinshim_detail_fetch_constrained_derivatives(const pinshim *s, int impulse, double **out)
{
    const pin::Data &d = *s->cdata_fam[impulse ? FAM_IMPD : FAM_CDD];
    if (impulse) {
        if (out[0]) copy_mat(d.ddq_dq, out[0]);
        if (out[1]) {
            copy_mat(d.ddq_dv, out[1]);
            for (int i = 0; i < s->model.nv; ++i)
                out[1][i * s->model.nv + i] += 1.0;
        }
        if (out[2]) copy_mat(d.dlambda_dq, out[2]);
        if (out[3]) copy_mat(d.dlambda_dv, out[3]);
        if (out[4]) copy_vec(d.dq_after, out[4]);
        if (out[5]) copy_vec(d.impulse_c, out[5]);
        return;
    }
    if (out[0]) copy_mat(d.ddq_dq, out[0]);
    if (out[1]) copy_mat(d.ddq_dv, out[1]);
    if (out[2]) copy_mat(d.ddq_dtau, out[2]);
    if (out[3]) copy_mat(d.dlambda_dq, out[3]);
    if (out[4]) copy_mat(d.dlambda_dv, out[4]);
    if (out[5]) copy_mat(d.dlambda_dtau, out[5]);
    if (out[6]) copy_vec(d.ddq, out[6]);
    if (out[7]) copy_vec(d.lambda_c, out[7]);
}

}  /* extern "C" */

#endif /* PINSHIM_PART_CORE */

/* Declarations of the core helpers used by the algorithm parts. */
extern "C" {
void pinshim_detail_fetch_tau(const pinshim *s, double *out);
void pinshim_detail_fetch_nle(const pinshim *s, double *out);
void pinshim_detail_fetch_M(const pinshim *s, double *out);
void pinshim_detail_fetch_Minv(const pinshim *s, double *out);
void pinshim_detail_fetch_ddq(const pinshim *s, double *out);
void pinshim_detail_fetch_constrained(const pinshim *s, int family, double *ddq, double *lam);
void pinshim_detail_fetch_delassus_inv(const pinshim *s, double *out);
void pinshim_detail_fetch_impulse(const pinshim *s, double *v_plus, double *impulse);
void pinshim_detail_fetch_derivatives(const pinshim *s, int aba, double *dq, double *dv, double *sym,
                                      double *value);
void pinshim_detail_fetch_constrained_derivatives(const pinshim *s, int impulse, double **out);
}

/* ===================================================================== */
/*  Unconstrained algorithms                                             */
/* ===================================================================== */
extern "C" {

#if defined(PINSHIM_PART_RNEA)
/* tau = rnea(q, v, a)  (pinocchio::rnea; result in data.tau). */
int pinshim_rnea(pinshim *s, const double *q, const double *v, const double *a, double *tau)
{
    PINSHIM_TRY
    const int nq = s->model.nq, nv = s->model.nv;
    pin::rnea(s->model, *s->data, CVec(q, nq), CVec(v, nv), CVec(a, nv));
    if (tau)
        pinshim_detail_fetch_tau(s, tau);
    return 0;
    PINSHIM_CATCH
}

/* b = nonLinearEffects(q, v)  (result in data.nle). */
int pinshim_nle(pinshim *s, const double *q, const double *v, double *b)
{
    PINSHIM_TRY
    pin::nonLinearEffects(s->model, *s->data, CVec(q, s->model.nq), CVec(v, s->model.nv));
    if (b)
        pinshim_detail_fetch_nle(s, b);
    return 0;
    PINSHIM_CATCH
}
#endif

#if defined(PINSHIM_PART_CRBA)
/* M = crba(q)  (pinocchio::crba, WORLD convention as by default; upper triangle in data.M). */
int pinshim_crba(pinshim *s, const double *q, double *M)
{
    PINSHIM_TRY
    pin::crba(s->model, *s->data, CVec(q, s->model.nq));
    if (M)
        pinshim_detail_fetch_M(s, M);
    return 0;
    PINSHIM_CATCH
}

/* x = M(q)^-1 b: crba, cholesky::decompose (sparse U D U^T), cholesky::solve -- as a user
 * calls them (rbdgen's crba_solve).  The solve works in place on a buffer sized once. */
int pinshim_crba_solve(pinshim *s, const double *q, const double *b, double *x)
{
    PINSHIM_TRY
    static thread_local Eigen::VectorXd rhs;
    const int nv = s->model.nv;
    pin::crba(s->model, *s->data, CVec(q, s->model.nq));
    pin::cholesky::decompose(s->model, *s->data);
    rhs = CVec(b, nv);
    pin::cholesky::solve(s->model, *s->data, rhs);
    if (x)
        Eigen::Map<Eigen::VectorXd>(x, nv) = rhs;
    return 0;
    PINSHIM_CATCH
}
#endif

#if defined(PINSHIM_PART_ABA)
/* ddq = aba(q, v, tau)  (pinocchio::aba, default convention; result in data.ddq). */
int pinshim_aba(pinshim *s, const double *q, const double *v, const double *tau, double *ddq)
{
    PINSHIM_TRY
    const int nq = s->model.nq, nv = s->model.nv;
    pin::aba(s->model, *s->data, CVec(q, nq), CVec(v, nv), CVec(tau, nv));
    if (ddq)
        pinshim_detail_fetch_ddq(s, ddq);
    return 0;
    PINSHIM_CATCH
}

/* Minv = computeMinverse(q)  (the ABA-based algorithm of Carpentier & Mansard, RSS 2018
 * §IV; upper triangle in data.Minv, mirrored here). */
int pinshim_minv(pinshim *s, const double *q, double *Minv)
{
    PINSHIM_TRY
    pin::computeMinverse(s->model, *s->data, CVec(q, s->model.nq));
    if (Minv)
        pinshim_detail_fetch_Minv(s, Minv);
    return 0;
    PINSHIM_CATCH
}
#endif

#if defined(PINSHIM_PART_DERIVATIVES)
/* (dtau/dq, dtau/dv, M, tau) = computeRNEADerivatives(q, v, a) (Carpentier & Mansard, RSS
 * 2018, Alg. 1; results in data.dtau_dq, data.dtau_dv, data.M, data.tau; dq in the tangent
 * space). */
int pinshim_rnea_derivatives(pinshim *s, const double *q, const double *v, const double *a, double *dtau_dq,
                             double *dtau_dv, double *M, double *tau)
{
    PINSHIM_TRY
    const int nq = s->model.nq, nv = s->model.nv;
    pin::computeRNEADerivatives(s->model, *s->data, CVec(q, nq), CVec(v, nv), CVec(a, nv));
    if (dtau_dq || dtau_dv || M || tau)
        pinshim_detail_fetch_derivatives(s, 0, dtau_dq, dtau_dv, M, tau);
    return 0;
    PINSHIM_CATCH
}

/* (dddq/dq, dddq/dv, M^-1, ddq) = computeABADerivatives(q, v, tau) (RSS 2018 §IV; results
 * in data.ddq_dq, data.ddq_dv, data.Minv, data.ddq). */
int pinshim_aba_derivatives(pinshim *s, const double *q, const double *v, const double *tau, double *ddq_dq,
                            double *ddq_dv, double *Minv, double *ddq)
{
    PINSHIM_TRY
    const int nq = s->model.nq, nv = s->model.nv;
    pin::computeABADerivatives(s->model, *s->data, CVec(q, nq), CVec(v, nv), CVec(tau, nv));
    if (ddq_dq || ddq_dv || Minv || ddq)
        pinshim_detail_fetch_derivatives(s, 1, ddq_dq, ddq_dv, Minv, ddq);
    return 0;
    PINSHIM_CATCH
}
#endif /* PINSHIM_PART_DERIVATIVES */

#if defined(PINSHIM_PART_SECOND_ORDER)
/* (d2tau_dqdq, d2tau_dvdv, dtau_dqdv, dtau_dadq) = ComputeRNEASecondOrderDerivatives(q, v,
 * a) (results in the Data::Tensor3x members of the same names, column-major: (i, j, k) at
 * i + nv j + nv^2 k).  Each is copied out as rbdgen's nv x nv^2 output, row-major: (i, j,
 * k) at i nv^2 + j + nv k.  Any pointer may be NULL. */
static void copy_tensor(const pin::Data::Tensor3x &T, int nv, double *out)
{
    if (!out)
        return;
    for (int k = 0; k < nv; ++k)
        for (int j = 0; j < nv; ++j)
            for (int i = 0; i < nv; ++i)
                out[(size_t)i * nv * nv + j + (size_t)nv * k] = T(i, j, k);
}

int pinshim_rnea_second_order(pinshim *s, const double *q, const double *v, const double *a, double *d2tau_dqdq,
                              double *d2tau_dvdv, double *dtau_dqdv, double *dtau_dadq)
{
    PINSHIM_TRY
    const int nq = s->model.nq, nv = s->model.nv;
    pin::ComputeRNEASecondOrderDerivatives(s->model, *s->data, CVec(q, nq), CVec(v, nv), CVec(a, nv));
    copy_tensor(s->data->d2tau_dqdq, nv, d2tau_dqdq);
    copy_tensor(s->data->d2tau_dvdv, nv, d2tau_dvdv);
    copy_tensor(s->data->d2tau_dqdv, nv, dtau_dqdv);
    copy_tensor(s->data->d2tau_dadq, nv, dtau_dadq);
    return 0;
    PINSHIM_CATCH
}
#endif /* PINSHIM_PART_SECOND_ORDER */

/* ===================================================================== */
/*  Constrained algorithms (after pinshim_init_constraints)              */
/* ===================================================================== */
#define PINSHIM_NEED_CONSTRAINTS                                                     \
    if (!s->constraints_ready) {                                                     \
        pinshim_set_error("call pinshim_init_constraints before constrained calls"); \
        return 3;                                                                    \
    }

#if defined(PINSHIM_PART_CONSTRAINED)

/* (ddq, lambda) = constraintDynamics(q, v, tau): proximal sparse Cholesky
 * (Carpentier et al. RSS 2021).  lambda: M ddq + b = tau + J^T lambda. */
int pinshim_constraint_dynamics(pinshim *s, const double *q, const double *v, const double *tau,
                                double *ddq, double *lam)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    const int nq = s->model.nq, nv = s->model.nv;
    pin::constraintDynamics(s->model, *s->cdata_fam[FAM_CD], KVec(q, nq), KVec(v, nv), KVec(tau, nv),
                            s->cmodels, s->cdatas[FAM_CD], s->settings[FAM_CD]);
    if (ddq || lam)
        pinshim_detail_fetch_constrained(s, FAM_CD, ddq, lam);
    return 0;
    PINSHIM_CATCH
}
#endif /* PINSHIM_PART_CONSTRAINED */

#if defined(PINSHIM_PART_CONTACT)

/* contactABA: ABA with the contacts as penalty inertias (mu_S = 1 / mu), iterated.
 * contactABA warm-starts from the forces of its previous call; they are zeroed first so
 * that every call starts from lambda = 0 like rbdgen's kernels (m stores). */
int pinshim_contact_aba(pinshim *s, const double *q, const double *v, const double *tau,
                        double *ddq, double *lam)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    const int nq = s->model.nq, nv = s->model.nv;
    for (CData &cd : s->cdatas[FAM_CABA])
        cd.contact_force.setZero();
    pin::contactABA(s->model, *s->cdata_fam[FAM_CABA], KVec(q, nq), KVec(v, nv), KVec(tau, nv),
                    s->cmodels, s->cdatas[FAM_CABA], s->settings[FAM_CABA]);
    if (ddq || lam)
        pinshim_detail_fetch_constrained(s, FAM_CABA, ddq, lam);
    return 0;
    PINSHIM_CATCH
}

/* lcaba: loop-constrained ABA (augmented Lagrangian in maximal coordinates, penalty
 * 1 / mu; handles loop closures).  Measured against constraintDynamics / rbdgen at
 * equal mu and iterations: 3D contacts agree up to the augmented Lagrangian's rounding
 * (~2e-6 relative on solo12's feet), 6D contacts do not (a convention of lcaba's 6D rows
 * that this shim does not reproduce), so it is not a default peer. */
int pinshim_lcaba(pinshim *s, const double *q, const double *v, const double *tau, double *ddq,
                  double *lam)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    const int nq = s->model.nq, nv = s->model.nv;
    pin::lcaba(s->model, *s->cdata_fam[FAM_LCABA], CVec(q, nq), CVec(v, nv), CVec(tau, nv),
               s->cmodels, s->cdatas[FAM_LCABA], s->settings[FAM_LCABA]);
    if (ddq || lam)
        pinshim_detail_fetch_constrained(s, FAM_LCABA, ddq, lam);
    return 0;
    PINSHIM_CATCH
}

/* (J M^-1 J^T + mu I)^-1 (m x m, row-major) by computeDampedDelassusMatrixInverse
 * with PV-OSIMr (Pv = true), unscaled, mu from pinshim_init_constraints.  Pinocchio
 * writes the blocks on and above the diagonal; `out` gets the full symmetric matrix,
 * the upper triangle mirrored (timed with out = NULL: Pinocchio's call alone). */
int pinshim_delassus_inv(pinshim *s, const double *q, double *out)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    pin::computeDampedDelassusMatrixInverse(s->model, *s->cdata_fam[FAM_DEL], CVec(q, s->model.nq),
                                            s->cmodels, s->cdatas[FAM_DEL], s->delassus_inv, s->mu,
                                            false, true);
    if (out)
        pinshim_detail_fetch_delassus_inv(s, out);
    return 0;
    PINSHIM_CATCH
}
#endif /* PINSHIM_PART_CONTACT */

#if defined(PINSHIM_PART_IMPULSE)
/* (v_plus, impulse) = impulseDynamics(q, v_minus): ONE solve of the damped KKT system
 *     [[-mu, J], [J^T, M]] [-impulse; v+ - v-] = [-(1 + r) J v-; 0]
 * (mu from pinshim_init_constraints, r from pinshim_set_restitution): rbdgen's first
 * proximal iterate of the impact map at the same mu; the converged map at mu -> 0. */
int pinshim_impulse_dynamics(pinshim *s, const double *q, const double *v_minus, double *v_plus,
                             double *impulse)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    const int nq = s->model.nq, nv = s->model.nv;
    pin::impulseDynamics(s->model, *s->cdata_fam[FAM_IMP], KVec(q, nq), KVec(v_minus, nv), s->cmodels,
                         s->cdatas[FAM_IMP], s->restitution, s->settings[FAM_IMP]);
    if (v_plus || impulse)
        pinshim_detail_fetch_impulse(s, v_plus, impulse);
    return 0;
    PINSHIM_CATCH
}
#endif /* PINSHIM_PART_IMPULSE */

#if defined(PINSHIM_PART_CONSTRAINED_DERIVATIVES)
/* The derivatives of the constrained forward dynamics as a user gets them from Pinocchio:
 * constraintDynamics (K proximal iterations at mu, the forward solve the derivatives are
 * taken at), then computeConstraintDynamicsDerivatives with the same settings (its
 * proximal solve of the derivative system).  Both calls are timed together (issue 13 §5). */
int pinshim_constraint_dynamics_derivatives(pinshim *s, const double *q, const double *v, const double *tau,
                                            double *ddq_dq, double *ddq_dv, double *ddq_dtau, double *dlam_dq,
                                            double *dlam_dv, double *dlam_dtau, double *ddq, double *lam)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    const int nq = s->model.nq, nv = s->model.nv;
    pin::Data &d = *s->cdata_fam[FAM_CDD];
    pin::constraintDynamics(s->model, d, KVec(q, nq), KVec(v, nv), KVec(tau, nv), s->cmodels, s->cdatas[FAM_CDD],
                            s->settings[FAM_CDD]);
    pin::computeConstraintDynamicsDerivatives(s->model, d, s->cmodels, s->cdatas[FAM_CDD], s->settings[FAM_CDD]);
    double *out[8] = {ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, ddq, lam};
    pinshim_detail_fetch_constrained_derivatives(s, 0, out);
    return 0;
    PINSHIM_CATCH
}

/* impulseDynamics (one damped solve, see pinshim_impulse_dynamics) then
 * computeImpulseDynamicsDerivatives at the same restitution and settings. */
int pinshim_impulse_dynamics_derivatives(pinshim *s, const double *q, const double *v_minus, double *dvplus_dq,
                                         double *dvplus_dv, double *dimpulse_dq, double *dimpulse_dv,
                                         double *v_plus, double *impulse)
{
    PINSHIM_TRY
    PINSHIM_NEED_CONSTRAINTS
    const int nq = s->model.nq, nv = s->model.nv;
    pin::Data &d = *s->cdata_fam[FAM_IMPD];
    pin::impulseDynamics(s->model, d, KVec(q, nq), KVec(v_minus, nv), s->cmodels, s->cdatas[FAM_IMPD],
                         s->restitution, s->settings[FAM_IMPD]);
    /* pin 4.1 writes data.dvc_dq only in the columns of each contact's supporting joints and
       then subtracts J M^-1 dtau/dq from all of it: the other columns keep the previous
       call's values (from the second call on, dv+/dq off by O(1) on solo12's feet; measured
       against a fresh initConstraintDynamics, which zeroes it).  A user must zero it too. */
    d.dvc_dq.setZero();
    pin::computeImpulseDynamicsDerivatives(s->model, d, s->cmodels, s->cdatas[FAM_IMPD], s->restitution,
                                           s->settings[FAM_IMPD]);
    double *out[6] = {dvplus_dq, dvplus_dv, dimpulse_dq, dimpulse_dv, v_plus, impulse};
    pinshim_detail_fetch_constrained_derivatives(s, 1, out);
    return 0;
    PINSHIM_CATCH
}
#endif /* PINSHIM_PART_CONSTRAINED_DERIVATIVES */

}  /* extern "C" */
