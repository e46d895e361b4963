// talos on its two 6D soles lowering its base, FDDP (the Python example's problem; the URDF
// has no armature):
// crocoddyl's DifferentialActionModelContactFwdDynamics against
// rbdgen::DifferentialActionModelContactFwdDynamics.   ./talos [--T 50] [--repeat 11]
#include <string>

#include <pinocchio/multibody/joint/joint-free-flyer.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include "base_problem.hpp"
#include RBDGEN_CROCODDYL_HEADER

int main(int argc, char** argv) {
  std::size_t T = 50;
  int repeat = 11;
  args(argc, argv, T, repeat);
  auto pm = std::make_shared<pinocchio::Model>();
  pinocchio::urdf::buildModel(std::string(ROBOTS_DIR) + "/talos_data/robots/talos_reduced.urdf",
                              pinocchio::JointModelFreeFlyer(), *pm);
  Eigen::VectorXd q0(39);   // example-robot-data's half_sitting
  q0 << 0., 0., 1.01927, 0., 0., 0., 1., 0., 0., -0.411354, 0.859395, -0.448041, -0.001708, 0., 0., -0.411354,
      0.859395, -0.448041, -0.001708, 0., 0.006761, 0.25847, 0.173046, -0.0002, -0.525366, 0., 0., 0.1, 0., -0.25847,
      -0.173046, 0.0002, -0.525366, 0., 0., 0.1, 0., 0., 0.;
  const std::vector<std::string> feet = {"left_sole_link", "right_sole_link"};
  const Eigen::Vector3d shift(0., 0., -0.05);
  return compare("talos on its soles", base_problem<crocoddyl::DifferentialActionModelContactFwdDynamics>(pm, q0, T, feet, true, shift),
                 base_problem<rbdgen::DifferentialActionModelContactFwdDynamics>(pm, q0, T, feet, true, shift), repeat);
}
