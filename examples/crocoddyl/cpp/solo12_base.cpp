// solo12 on its four feet moving its base, FDDP (the Python example's problem):
// crocoddyl's DifferentialActionModelContactFwdDynamics against
// rbdgen::DifferentialActionModelContactFwdDynamics.   ./solo12 [--T 50] [--repeat 11]
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
  pinocchio::urdf::buildModel(std::string(ROBOTS_DIR) + "/solo_description/robots/solo12.urdf",
                              pinocchio::JointModelFreeFlyer(), *pm);
  Eigen::VectorXd q0(19);
  q0 << 0., 0., 0.235, 0., 0., 0., 1., 0.1, 0.8, -1.6, -0.1, 0.8, -1.6, 0.1, -0.8, 1.6, -0.1, -0.8, 1.6;
  const std::vector<std::string> feet = {"FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"};
  const Eigen::Vector3d shift(0.05, 0., -0.03);
  const int rc = compare(
      "solo12 on four feet",
      base_problem<crocoddyl::DifferentialActionModelContactFwdDynamics>(pm, q0, T, feet, false, shift),
      base_problem<rbdgen::DifferentialActionModelContactFwdDynamics>(pm, q0, T, feet, false, shift), repeat);
  return rc | node_check<rbdgen::DifferentialActionModelContactFwdDynamics>("solo12", pm, q0, feet, false);
}
