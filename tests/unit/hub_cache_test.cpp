// Hub ids resolved through a fake Hugging Face cache laid out in a temporary folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/config.h"
#include "model/hub_cache.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

const std::string kMain = "1111111111111111111111111111111111111111";
const std::string kOther = "2222222222222222222222222222222222222222";

class HubCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_hub_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // <root>/models--org--name with refs/main, refs/other-branch and their snapshots.
  fs::path lay_out(const fs::path& root) {
    const fs::path repo = root / "models--org--name";
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << kMain;  // as huggingface_hub writes it: no newline
    std::ofstream(repo / "refs" / "other-branch") << kOther << "\n";
    for (const std::string& h : {kMain, kOther}) {
      fs::create_directories(repo / "snapshots" / h);
      std::ofstream(repo / "snapshots" / h / "config.json") << "{}";
    }
    return repo;
  }

  std::string error_of(const std::string& id, const std::string& rev, const HubEnv& env) {
    try {
      resolve_model_path(id, rev, "--model-path", env);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(HubCacheTest, IdResolvesThroughHfHubCache) {
  const fs::path repo = lay_out(dir_ / "cache");
  HubEnv env{(dir_ / "cache").string(), (dir_ / "unused").string(), (dir_ / "unused").string()};
  EXPECT_EQ(resolve_model_path("org/name", "", "--model-path", env),
            (repo / "snapshots" / kMain).string());
}

TEST_F(HubCacheTest, IdResolvesThroughHfHome) {
  const fs::path repo = lay_out(dir_ / "hfhome" / "hub");
  HubEnv env{"", (dir_ / "hfhome").string(), (dir_ / "unused").string()};
  EXPECT_EQ(resolve_model_path("org/name", "", "--model-path", env),
            (repo / "snapshots" / kMain).string());
}

TEST_F(HubCacheTest, IdResolvesThroughHomeDefault) {
  const fs::path repo = lay_out(dir_ / "home" / ".cache" / "huggingface" / "hub");
  HubEnv env{"", "", (dir_ / "home").string()};
  EXPECT_EQ(resolve_model_path("org/name", "", "--model-path", env),
            (repo / "snapshots" / kMain).string());
}

TEST_F(HubCacheTest, RevisionByBranchAndByHash) {
  const fs::path repo = lay_out(dir_);
  HubEnv env{dir_.string(), "", ""};
  EXPECT_EQ(resolve_model_path("org/name", "other-branch", "--model-path", env),
            (repo / "snapshots" / kOther).string());
  EXPECT_EQ(resolve_model_path("org/name", "main", "--model-path", env),
            (repo / "snapshots" / kMain).string());
  // A commit hash goes straight to its snapshot, whichever refs point there.
  EXPECT_EQ(resolve_model_path("org/name", kOther, "--model-path", env),
            (repo / "snapshots" / kOther).string());
  const std::string e = error_of("org/name", "no-such-branch", env);
  EXPECT_NE(e.find((repo / "refs" / "no-such-branch").string()), std::string::npos) << e;
  EXPECT_NE(e.find("--revision no-such-branch"), std::string::npos) << e;
}

TEST_F(HubCacheTest, LocalDirectoryWinsOverId) {
  lay_out(dir_ / "cache");
  HubEnv env{(dir_ / "cache").string(), "", ""};
  const fs::path cwd = fs::current_path();
  fs::create_directories(dir_ / "org" / "name");
  fs::current_path(dir_);
  const std::string got = resolve_model_path("org/name", "", "--model-path", env);
  fs::current_path(cwd);
  EXPECT_EQ(got, "org/name");
}

TEST_F(HubCacheTest, MissingIdNamesWhereItLookedAndHowToDownload) {
  HubEnv env{(dir_ / "cache").string(), "", ""};
  const std::string e = error_of("zai-org/GLM-5.2-FP8", "", env);
  EXPECT_NE(e.find("--model-path zai-org/GLM-5.2-FP8"), std::string::npos) << e;
  EXPECT_NE(e.find((dir_ / "cache").string()), std::string::npos) << e;
  EXPECT_NE(e.find((dir_ / "cache" / "models--zai-org--GLM-5.2-FP8").string()), std::string::npos)
      << e;
  EXPECT_NE(e.find("hf download zai-org/GLM-5.2-FP8"), std::string::npos) << e;
  EXPECT_NE(e.find("huggingface-cli download zai-org/GLM-5.2-FP8"), std::string::npos) << e;
}

TEST_F(HubCacheTest, MalformedIdsAreOnlyPaths) {
  lay_out(dir_ / "cache");
  HubEnv env{(dir_ / "cache").string(), "", ""};
  for (const std::string p : {"a/b/c", "/abs", "a/", "/org/name", "./org/name", ".org/name"}) {
    EXPECT_FALSE(is_hub_id(p)) << p;
    EXPECT_EQ(resolve_model_path(p, "", "--model-path", env), p);
    // ...and loading reports the missing config.json, as for any path.
    try {
      ModelConfig::from_file((fs::path(p) / "config.json").string());
      ADD_FAILURE() << p << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(is_hub_id("org/name"));
  EXPECT_TRUE(is_hub_id("zai-org/GLM-5.2-FP8"));
}

TEST_F(HubCacheTest, CacheRootOrder) {
  EXPECT_EQ((HubEnv{"/c", "/h", "/u"}.cache_root()), "/c");
  EXPECT_EQ((HubEnv{"", "/h", "/u"}.cache_root()), "/h/hub");
  EXPECT_EQ((HubEnv{"", "", "/u"}.cache_root()), "/u/.cache/huggingface/hub");
}

}  // namespace
}  // namespace tandem
