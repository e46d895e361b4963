// The legged problems of the examples (problems.py's _base_problem): the base moved by
// `shift` while the feet hold (3D or 6D contacts, LOCAL, Baumgarte [0, 50]), state and
// control regularisation, dt = 10 ms; built with crocoddyl's or rbdgen's contact model.
#ifndef RBDGEN_CROCODDYL_EXAMPLES_BASE_PROBLEM_HPP
#define RBDGEN_CROCODDYL_EXAMPLES_BASE_PROBLEM_HPP

#include <string>
#include <vector>

#include <crocoddyl/core/activations/weighted-quadratic.hpp>
#include <crocoddyl/core/costs/cost-sum.hpp>
#include <crocoddyl/core/costs/residual.hpp>
#include <crocoddyl/core/residuals/control.hpp>
#include <crocoddyl/multibody/actuations/floating-base.hpp>
#include <crocoddyl/multibody/contacts/contact-3d.hpp>
#include <crocoddyl/multibody/contacts/contact-6d.hpp>
#include <crocoddyl/multibody/contacts/multiple-contacts.hpp>
#include <crocoddyl/multibody/residuals/frame-translation.hpp>
#include <crocoddyl/multibody/residuals/state.hpp>
#include <pinocchio/algorithm/frames.hpp>

#include "compare.hpp"

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
    auto contacts = std::make_shared<crocoddyl::ContactModelMultiple>(state, nu);
    for (const std::string& foot : feet) {
      const auto fid = pm->getFrameId(foot);
      if (six_d) {
        contacts->addContact(foot, std::make_shared<crocoddyl::ContactModel6D>(
                                       state, fid, data.oMf[fid], pinocchio::LOCAL, nu, Eigen::Vector2d(0., 50.)));
      } else {
        contacts->addContact(foot, std::make_shared<crocoddyl::ContactModel3D>(
                                       state, fid, data.oMf[fid].translation(), pinocchio::LOCAL, nu,
                                       Eigen::Vector2d(0., 50.)));
      }
    }
    return std::make_shared<Model>(state, actuation, contacts, c, 0., false);
  };
  std::vector<std::shared_ptr<crocoddyl::DifferentialActionModelAbstract>> running;
  for (std::size_t k = 0; k < T; ++k) running.push_back(model(false));
  return shooting(x0, running, model(true), 1e-2);
}

#endif
