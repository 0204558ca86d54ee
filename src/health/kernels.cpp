#include "health/kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace tightrope::health {
namespace {

constexpr size_t kMatrix = 96;  // small enough to stay in a core's cache: the core, not memory

struct Matrices {
  std::vector<double> a, b;
};

Matrices inputs() {
  Matrices m{std::vector<double>(kMatrix * kMatrix), std::vector<double>(kMatrix * kMatrix)};
  for (size_t i = 0; i < kMatrix * kMatrix; ++i) {
    m.a[i] = static_cast<double>(i % 7) * 0.25 + 1.0;
    m.b[i] = static_cast<double>(i % 5) * 0.5 - 1.0;
  }
  return m;
}

// C = A * B and the sum of C: the same operations in the same order on every core give the same
// bits, so any difference is a core that computed wrong.
double multiply(const Matrices& m, std::vector<double>& c) {
  std::fill(c.begin(), c.end(), 0.0);
  for (size_t i = 0; i < kMatrix; ++i) {
    for (size_t k = 0; k < kMatrix; ++k) {
      const double aik = m.a[i * kMatrix + k];
      for (size_t j = 0; j < kMatrix; ++j) {
        c[i * kMatrix + j] += aik * m.b[k * kMatrix + j];
      }
    }
  }
  double sum = 0;
  for (const double v : c) {
    sum += v;
  }
  return sum;
}

}  // namespace

Measurement measure_cpu(unsigned threads, std::chrono::milliseconds duration) {
  const Matrices m = inputs();
  std::vector<double> scratch(kMatrix * kMatrix);
  const double expected = multiply(m, scratch);
  threads = std::max(threads, 1U);
  std::vector<uint64_t> done(threads, 0);
  std::vector<double> wrong(threads, expected);
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + duration;
  {
    std::vector<std::jthread> workers;
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::vector<double> c(kMatrix * kMatrix);
        while (std::chrono::steady_clock::now() < until) {
          const double got = multiply(m, c);
          if (got != expected) {
            wrong[t] = got;
          }
          ++done[t];
        }
      });
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Measurement out;
  uint64_t multiplications = 0;
  for (unsigned t = 0; t < threads; ++t) {
    multiplications += done[t];
    if (wrong[t] != expected && out.correct) {
      out.correct = false;
      out.error = "CPU thread " + std::to_string(t) + " computed " + std::to_string(wrong[t]) +
                  ", expected " + std::to_string(expected);
    }
  }
  const double flops = 2.0 * kMatrix * kMatrix * kMatrix * static_cast<double>(multiplications);
  out.rate = flops / seconds / 1e9;
  return out;
}

Measurement measure_memory_bandwidth(unsigned threads, size_t bytes_per_array, int passes) {
  threads = std::max(threads, 1U);
  const size_t n = std::max<size_t>(bytes_per_array / sizeof(double), threads);
  std::vector<double> a(n, 0.0);
  std::vector<double> b(n, 1.0);
  std::vector<double> c(n, 2.0);
  constexpr double kScalar = 3.0;
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    {
      std::vector<std::jthread> workers;
      for (unsigned t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
          const size_t from = n * t / threads;
          const size_t to = n * (t + 1) / threads;
          for (size_t i = from; i < to; ++i) {
            a[i] = b[i] + kScalar * c[i];
          }
        });
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 3.0 * sizeof(double) * static_cast<double>(n) / seconds / 1e6);
  }
  Measurement out;
  out.rate = best;
  const double want = 1.0 + kScalar * 2.0;
  const auto bad = std::find_if(a.begin(), a.end(), [&](double v) { return v != want; });
  if (bad != a.end()) {
    out.correct = false;
    out.error = "memory read back " + std::to_string(*bad) + " at element " +
                std::to_string(bad - a.begin()) + ", expected " + std::to_string(want);
  }
  return out;
}

}  // namespace tightrope::health
