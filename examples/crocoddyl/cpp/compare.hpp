// Solve one problem built with crocoddyl's built-in model and with rbdgen's, FDDP from the
// quasi-static guess, alternating, and print iterations, cost, the largest trajectory
// difference and the solve-time medians (the Python examples' report).
#ifndef RBDGEN_CROCODDYL_EXAMPLES_COMPARE_HPP
#define RBDGEN_CROCODDYL_EXAMPLES_COMPARE_HPP

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <utility>
#include <vector>

#include <crocoddyl/core/integrator/euler.hpp>
#include <crocoddyl/core/optctrl/shooting.hpp>
#include <crocoddyl/core/solvers/fddp.hpp>

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline std::shared_ptr<crocoddyl::ShootingProblem> shooting(
    const Eigen::VectorXd& x0, const std::vector<std::shared_ptr<crocoddyl::DifferentialActionModelAbstract>>& running,
    const std::shared_ptr<crocoddyl::DifferentialActionModelAbstract>& terminal, double dt) {
  std::vector<std::shared_ptr<crocoddyl::ActionModelAbstract>> models;
  for (const auto& m : running) models.push_back(std::make_shared<crocoddyl::IntegratedActionModelEuler>(m, dt));
  auto problem = std::make_shared<crocoddyl::ShootingProblem>(
      x0, models, std::make_shared<crocoddyl::IntegratedActionModelEuler>(terminal, 0.));
  // The wheel's CMake configuration defines CROCODDYL_WITH_NTHREADS=2, and a problem's
  // loops over nodes take that many threads whatever OMP_NUM_THREADS says: one thread, as
  // the Python problems run, so a solve's CPU time is one core's.
  problem->set_nthreads(1);
  return problem;
}

// The process's CPU time (s): on a loaded machine the wall time also counts the time the
// process waited for a core (one thread: OMP_NUM_THREADS=1).
inline double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// FDDP from the quasi-static guess: (wall, CPU) seconds.
inline std::pair<double, double> solve(crocoddyl::SolverFDDP& solver,
                                       const std::shared_ptr<crocoddyl::ShootingProblem>& p) {
  std::vector<Eigen::VectorXd> xs(p->get_T() + 1, p->get_x0());
  std::vector<Eigen::VectorXd> us(p->get_T(), Eigen::VectorXd::Zero(p->get_runningModels()[0]->get_nu()));
  std::vector<Eigen::VectorXd> xs0(xs.begin(), xs.end() - 1);
  p->quasiStatic(us, xs0);
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  solver.solve(xs, us, 100, false);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), cpu_seconds() - c0};
}

inline int compare(const char* title, const std::shared_ptr<crocoddyl::ShootingProblem>& builtin,
                   const std::shared_ptr<crocoddyl::ShootingProblem>& ours, int repeat) {
  crocoddyl::SolverFDDP sb(builtin), sr(ours);
  std::vector<double> tb, tr, cb, cr;
  for (int i = 0; i < repeat; ++i) {
    const auto b = solve(sb, builtin);
    const auto r = solve(sr, ours);
    tb.push_back(b.first);
    cb.push_back(b.second);
    tr.push_back(r.first);
    cr.push_back(r.second);
  }
  double diff = 0.;
  for (std::size_t k = 0; k < sb.get_xs().size(); ++k)
    diff = std::max(diff, (sb.get_xs()[k] - sr.get_xs()[k]).cwiseAbs().maxCoeff());
  for (std::size_t k = 0; k < sb.get_us().size(); ++k)
    diff = std::max(diff, (sb.get_us()[k] - sr.get_us()[k]).cwiseAbs().maxCoeff());
  std::printf("%s (C++, T = %zu, %d solves each)\n", title, builtin->get_T(), repeat);
  std::printf("  built-in  iterations %3zu  cost %.12e  solve median %8.2f ms (CPU %8.2f ms)\n", sb.get_iter(),
              sb.get_cost(), 1e3 * median(tb), 1e3 * median(cb));
  std::printf("  rbdgen    iterations %3zu  cost %.12e  solve median %8.2f ms (CPU %8.2f ms)\n", sr.get_iter(),
              sr.get_cost(), 1e3 * median(tr), 1e3 * median(cr));
  std::printf("  same iterations: %s; cost relative difference %.1e; largest trajectory difference %.1e; "
              "rbdgen / built-in CPU time %.2f\n", sb.get_iter() == sr.get_iter() ? "yes" : "no",
              std::abs(sr.get_cost() - sb.get_cost()) / std::abs(sb.get_cost()), diff, median(cr) / median(cb));
  return sb.get_iter() == sr.get_iter() ? 0 : 1;
}

inline void args(int argc, char** argv, std::size_t& T, int& repeat) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--T") T = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::string(argv[i]) == "--repeat") repeat = std::atoi(argv[i + 1]);
  }
}

#endif
