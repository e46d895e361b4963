// The legged problems of the examples (problems.py's _base_problem): the base moved by
// `shift` while the feet hold (3D or 6D contacts, LOCAL, Baumgarte [0, 50]), state and
// control regularisation, dt = 10 ms; built with crocoddyl's or rbdgen's contact model.
#ifndef RBDGEN_CROCODDYL_EXAMPLES_BASE_PROBLEM_HPP
#define RBDGEN_CROCODDYL_EXAMPLES_BASE_PROBLEM_HPP

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <crocoddyl/core/activations/weighted-quadratic.hpp>
#include <crocoddyl/core/costs/cost-sum.hpp>
#include <crocoddyl/core/costs/residual.hpp>
#include <crocoddyl/core/residuals/control.hpp>
#include <crocoddyl/core/residuals/joint-effort.hpp>
#include <crocoddyl/multibody/actions/contact-fwddyn.hpp>
#include <crocoddyl/multibody/actuations/floating-base.hpp>
#include <crocoddyl/multibody/contacts/contact-3d.hpp>
#include <crocoddyl/multibody/contacts/contact-6d.hpp>
#include <crocoddyl/multibody/contacts/multiple-contacts.hpp>
#include <crocoddyl/multibody/residuals/frame-translation.hpp>
#include <crocoddyl/multibody/residuals/state.hpp>
#include <pinocchio/algorithm/frames.hpp>

#include "compare.hpp"

inline std::shared_ptr<crocoddyl::ContactModelMultiple> feet_contacts(
    const std::shared_ptr<crocoddyl::StateMultibody>& state, std::size_t nu, const pinocchio::Model& pm,
    const pinocchio::Data& data, const std::vector<std::string>& feet, bool six_d) {
  auto contacts = std::make_shared<crocoddyl::ContactModelMultiple>(state, nu);
  for (const std::string& foot : feet) {
    const auto fid = pm.getFrameId(foot);
    if (six_d) {
      contacts->addContact(foot, std::make_shared<crocoddyl::ContactModel6D>(
                                     state, fid, data.oMf[fid], pinocchio::LOCAL, nu, Eigen::Vector2d(0., 50.)));
    } else {
      contacts->addContact(foot, std::make_shared<crocoddyl::ContactModel3D>(
                                     state, fid, data.oMf[fid].translation(), pinocchio::LOCAL, nu,
                                     Eigen::Vector2d(0., 50.)));
    }
  }
  return contacts;
}

template <class Model>
std::shared_ptr<crocoddyl::ShootingProblem> base_problem(const std::shared_ptr<pinocchio::Model>& pm,
                                                         const Eigen::VectorXd& q0, std::size_t T,
                                                         const std::vector<std::string>& feet, bool six_d,
                                                         const Eigen::Vector3d& shift) {
  auto state = std::make_shared<crocoddyl::StateMultibody>(pm);
  auto actuation = std::make_shared<crocoddyl::ActuationModelFloatingBase>(state);
  const std::size_t nu = actuation->get_nu(), nv = state->get_nv();
  Eigen::VectorXd x0(state->get_nx());
  x0 << q0, Eigen::VectorXd::Zero(nv);
  pinocchio::Data data(*pm);
  pinocchio::framesForwardKinematics(*pm, data, q0);
  const auto bid = pm->getFrameId("base_link");
  const Eigen::Vector3d target = data.oMf[bid].translation() + shift;
  Eigen::VectorXd w(2 * nv);
  w << Eigen::Vector3d::Zero(), Eigen::Vector3d::Constant(50.), Eigen::VectorXd::Constant(nv - 6, 0.01),
      Eigen::VectorXd::Constant(6, 10.), Eigen::VectorXd::Ones(nv - 6);
  auto model = [&](bool terminal) {
    auto c = std::make_shared<crocoddyl::CostModelSum>(state, nu);
    auto act = std::make_shared<crocoddyl::ActivationModelWeightedQuad>(w.cwiseProduct(w));
    c->addCost("state", std::make_shared<crocoddyl::CostModelResidual>(
                            state, act, std::make_shared<crocoddyl::ResidualModelState>(state, x0, nu)),
               terminal ? 1e1 : 1e-1);
    c->addCost("control", std::make_shared<crocoddyl::CostModelResidual>(
                              state, std::make_shared<crocoddyl::ResidualModelControl>(state, nu)),
               terminal ? 0. : 1e-3);
    c->addCost("base", std::make_shared<crocoddyl::CostModelResidual>(
                           state, std::make_shared<crocoddyl::ResidualModelFrameTranslation>(state, bid, target, nu)),
               terminal ? 1e4 : 1e2);
    return std::make_shared<Model>(state, actuation, feet_contacts(state, nu, *pm, data, feet, six_d), c, 0., false);
  };
  std::vector<std::shared_ptr<crocoddyl::DifferentialActionModelAbstract>> running;
  for (std::size_t k = 0; k < T; ++k) running.push_back(model(false));
  return shooting(x0, running, model(true), 1e-2);
}

inline double relative_difference(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1., b.cwiseAbs().maxCoeff());
}

/// One node at a perturbed state, each model with enable_force and a joint-effort cost (the
/// joint data): the largest relative difference of rbdgen's model's xout, Fx, Fu, force
/// derivatives and cost derivatives from the built-in's (the Python tests' node comparison).
/// (A class derived from crocoddyl's floating-base actuation, for the C++ model's general
/// route, is no test here: that class has a member only without NDEBUG, so in a program
/// built without NDEBUG, as the tests build the examples, destroying one frees garbage; the
/// Python tests cover the general route.)
template <class Ours>
double node_difference(const std::shared_ptr<pinocchio::Model>& pm, const Eigen::VectorXd& q0,
                       const std::vector<std::string>& feet, bool six_d) {
  auto state = std::make_shared<crocoddyl::StateMultibody>(pm);
  auto actuation = std::make_shared<crocoddyl::ActuationModelFloatingBase>(state);
  const std::size_t nu = actuation->get_nu(), nv = state->get_nv();
  pinocchio::Data data(*pm);
  pinocchio::framesForwardKinematics(*pm, data, q0);
  Eigen::VectorXd x(state->get_nx()), u(nu);
  x << q0, Eigen::VectorXd::Zero(nv);
  const Eigen::VectorXd noise = Eigen::VectorXd::LinSpaced(nv, -0.3, 0.4).array().sin();
  x.segment(7, nv - 6) += 0.1 * noise.tail(nv - 6);
  x.tail(nv) = noise;
  u = Eigen::VectorXd::LinSpaced(nu, -2., 3.);
  auto costs = std::make_shared<crocoddyl::CostModelSum>(state, nu);
  costs->addCost("state", std::make_shared<crocoddyl::CostModelResidual>(
                              state, std::make_shared<crocoddyl::ResidualModelState>(state, x, nu)), 1e-1);
  costs->addCost("effort", std::make_shared<crocoddyl::CostModelResidual>(
                               state, std::make_shared<crocoddyl::ResidualModelJointEffort>(
                                          state, actuation, Eigen::VectorXd::Ones(nu), nu)), 1e-3);
  auto contacts = feet_contacts(state, nu, *pm, data, feet, six_d);
  crocoddyl::DifferentialActionModelContactFwdDynamics mb(state, actuation, contacts, costs, 0., true);
  Ours mr(state, actuation, contacts, costs, 0., true);
  auto db = mb.createData(), dr = mr.createData();
  mb.calc(db, x, u);
  mb.calcDiff(db, x, u);
  mr.calc(dr, x, u);
  mr.calcDiff(dr, x, u);
  typedef crocoddyl::DifferentialActionDataContactFwdDynamics Data;
  const Data& b = *static_cast<Data*>(db.get());
  const Data& r = *static_cast<Data*>(dr.get());
  double worst = std::abs(r.cost - b.cost) / std::max(1., std::abs(b.cost));
  for (const auto& pair : {std::make_pair(&r.xout, &b.xout), std::make_pair(&r.Lx, &b.Lx),
                           std::make_pair(&r.Lu, &b.Lu)})
    worst = std::max(worst, relative_difference(*pair.first, *pair.second));
  for (const auto& pair : {std::make_pair(&r.Fx, &b.Fx), std::make_pair(&r.Fu, &b.Fu),
                           std::make_pair(&r.df_dx, &b.df_dx), std::make_pair(&r.df_du, &b.df_du),
                           std::make_pair(&r.Lxx, &b.Lxx), std::make_pair(&r.Lxu, &b.Lxu),
                           std::make_pair(&r.Luu, &b.Luu)})
    worst = std::max(worst, relative_difference(*pair.first, *pair.second));
  return worst;
}

/// node_difference, printed; 0 if within 1e-10 (the Python tests' NODE_RTOL: the proximal
/// iterates are (mu kappa)^3 ~ 1e-15 from the exact solution)
template <class Ours>
int node_check(const char* title, const std::shared_ptr<pinocchio::Model>& pm, const Eigen::VectorXd& q0,
               const std::vector<std::string>& feet, bool six_d) {
  const double worst = node_difference<Ours>(pm, q0, feet, six_d);
  std::printf("%s node with enable_force and a joint-effort cost: largest relative difference %.1e\n", title, worst);
  return worst <= 1e-10 ? 0 : 1;
}

#endif
