// docs/troubleshooting.md lists doctor's catalog, one heading a check, in the catalog's order:
// a check cannot be added, renamed or dropped without its page.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../api/support.hpp"
#include "doctor/checks.hpp"

namespace tightrope::doctor {
namespace {

TEST(TroubleshootingDoc, HasOneSectionPerCheckInCatalogOrder) {
  std::ifstream file(api::testing::source_dir() / "docs/troubleshooting.md");
  ASSERT_TRUE(file) << "docs/troubleshooting.md";
  std::vector<std::string> documented;
  std::string line;
  while (std::getline(file, line)) {
    if (line.starts_with("### `") && line.size() > 6) {
      documented.push_back(line.substr(5, line.find('`', 5) - 5));
    }
  }
  std::vector<std::string> checks;
  for (const auto& check : catalog()) {
    checks.emplace_back(check.id);
  }
  EXPECT_EQ(documented, checks);
}

}  // namespace
}  // namespace tightrope::doctor
