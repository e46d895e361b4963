// Panda reaching with FDDP (the Python example's problem, fingers locked at 0 as
// `rbdgen build panda` locks them): crocoddyl's DifferentialActionModelFreeFwdDynamics
// against rbdgen::DifferentialActionModelFreeFwdDynamics.   ./panda [--T 100] [--repeat 11]
#include <string>

#include <crocoddyl/core/activations/weighted-quadratic.hpp>
#include <crocoddyl/core/costs/cost-sum.hpp>
#include <crocoddyl/core/costs/residual.hpp>
#include <crocoddyl/core/residuals/control.hpp>
#include <crocoddyl/multibody/actuations/full.hpp>
#include <crocoddyl/multibody/residuals/frame-translation.hpp>
#include <crocoddyl/multibody/residuals/state.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/model.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include "compare.hpp"
#include RBDGEN_CROCODDYL_HEADER

template <class Model>
std::shared_ptr<crocoddyl::ShootingProblem> problem(const std::shared_ptr<pinocchio::Model>& pm,
                                                    const Eigen::VectorXd& q0, std::size_t T) {
  auto state = std::make_shared<crocoddyl::StateMultibody>(pm);
  auto actuation = std::make_shared<crocoddyl::ActuationModelFull>(state);
  const std::size_t nu = actuation->get_nu(), nv = state->get_nv();
  Eigen::VectorXd x0(state->get_nx());
  x0 << q0, Eigen::VectorXd::Zero(nv);
  const auto fid = pm->getFrameId("panda_hand_tcp");
  pinocchio::Data data(*pm);
  pinocchio::framesForwardKinematics(*pm, data, q0);
  const Eigen::Vector3d target = data.oMf[fid].translation() + Eigen::Vector3d(0.1, 0.2, -0.2);
  auto costs = [&](bool terminal) {
    auto c = std::make_shared<crocoddyl::CostModelSum>(state, nu);
    auto act = std::make_shared<crocoddyl::ActivationModelWeightedQuad>(Eigen::VectorXd::Ones(2 * nv));
    c->addCost("state", std::make_shared<crocoddyl::CostModelResidual>(
                            state, act, std::make_shared<crocoddyl::ResidualModelState>(state, x0, nu)),
               terminal ? 1e-1 : 1e-2);
    c->addCost("control", std::make_shared<crocoddyl::CostModelResidual>(
                              state, std::make_shared<crocoddyl::ResidualModelControl>(state, nu)),
               terminal ? 0. : 1e-3);
    c->addCost("goal", std::make_shared<crocoddyl::CostModelResidual>(
                           state, std::make_shared<crocoddyl::ResidualModelFrameTranslation>(state, fid, target, nu)),
               terminal ? 1e4 : 1e1);
    return c;
  };
  std::vector<std::shared_ptr<crocoddyl::DifferentialActionModelAbstract>> running;
  for (std::size_t k = 0; k < T; ++k) running.push_back(std::make_shared<Model>(state, actuation, costs(false)));
  return shooting(x0, running, std::make_shared<Model>(state, actuation, costs(true)), 1e-2);
}

int main(int argc, char** argv) {
  std::size_t T = 100;
  int repeat = 11;
  args(argc, argv, T, repeat);
  pinocchio::Model full;
  pinocchio::urdf::buildModel(std::string(ROBOTS_DIR) + "/panda_description/urdf/panda.urdf", full);
  std::vector<pinocchio::JointIndex> locked = {full.getJointId("panda_finger_joint1"),
                                               full.getJointId("panda_finger_joint2")};
  auto pm = std::make_shared<pinocchio::Model>(pinocchio::buildReducedModel(full, locked, pinocchio::neutral(full)));
  Eigen::VectorXd q0(7);
  q0 << 0., -0.785398, 0., -2.35619, 0., 1.5707, 0.785398;
  return compare("panda reaching", problem<crocoddyl::DifferentialActionModelFreeFwdDynamics>(pm, q0, T),
                 problem<rbdgen::DifferentialActionModelFreeFwdDynamics>(pm, q0, T), repeat);
}
