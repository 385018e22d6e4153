#include "cli/model_flags.h"

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "model/random_model.h"
#include "snapshot/model_fingerprint.h"

namespace flashkv::cli {
namespace {

TEST(ModelFlagsTest, FlagsFillTheStruct) {
  CLI::App app;
  ModelFlags f;
  AddModelFlags(&app, &f);
  AddNumericsFlags(&app, &f);
  std::string error;
  ASSERT_TRUE(testing::Parse(
      app,
      {"-m", "a.gguf", "-t", "3", "--backend", "cuda", "--numerics", "hf", "--act-quant", "off"},
      &error))
      << error;
  EXPECT_EQ(f.model, "a.gguf");
  EXPECT_EQ(f.threads, 3);
  EXPECT_EQ(f.backend, "cuda");
  EXPECT_EQ(f.numerics, "hf");
  EXPECT_EQ(f.act_quant, "off");

  // A command that offers only the model flags refuses the numerics ones; the backend
  // defaults to auto (CUDA when a GPU answers, else the CPU).
  CLI::App bare;
  ModelFlags g;
  AddModelFlags(&bare, &g);
  EXPECT_FALSE(testing::Parse(bare, {"--numerics", "hf"}, &error));
  EXPECT_EQ(g.backend, "auto");
  EXPECT_TRUE(g.model.empty());
}

TEST(ModelFlagsTest, OpenModelUsesTheFileDefaultsUnlessAFlagSaysOtherwise) {
  ModelFlags f;
  f.model = testing::Ds4TinyPath();
  Expected<ModelSetup> setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_EQ(setup->path, f.model);
  // A ds4 GGUF runs with official numerics and q8 activations by default.
  EXPECT_EQ(setup->options.numerics, NumericsMode::kOfficial);
  EXPECT_EQ(setup->options.act_quant, ActQuantMode::kQ8);
  EXPECT_FALSE(setup->tokenizer.Encode("Hello", /*allow_specials=*/false).empty());

  f.numerics = "hf";
  f.act_quant = "off";
  setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_EQ(setup->options.numerics, NumericsMode::kHf);
  EXPECT_EQ(setup->options.act_quant, ActQuantMode::kOff);
  EXPECT_EQ(setup->options.float_path, FloatPath::kExact);

  // fast: the official formulas on the backend's fast float path.
  f.numerics = "fast";
  f.act_quant.clear();
  setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_EQ(setup->options.numerics, NumericsMode::kOfficial);
  EXPECT_EQ(setup->options.float_path, FloatPath::kFast);
  EXPECT_EQ(NumericsName(setup->options), "fast");
}

TEST(ModelFlagsTest, OpenModelNamesABadFlagValueOrAMissingFile) {
  ModelFlags f;
  f.model = testing::Ds4TinyPath();
  f.numerics = "turbo";
  Expected<ModelSetup> setup = OpenModel(f);
  ASSERT_FALSE(setup.ok());
  EXPECT_EQ(setup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(setup.status().message().find("turbo"), std::string::npos) << setup.status().ToString();
  EXPECT_NE(setup.status().message().find("hf, official or fast"), std::string::npos)
      << setup.status().ToString();

  f.numerics.clear();
  f.act_quant = "q4";
  setup = OpenModel(f);
  ASSERT_FALSE(setup.ok());
  EXPECT_NE(setup.status().message().find("q4"), std::string::npos) << setup.status().ToString();

  f.model = "/no/such/m.gguf";
  setup = OpenModel(f);
  ASSERT_FALSE(setup.ok());
  EXPECT_EQ(setup.status().code(), StatusCode::kNotFound);
}

TEST(ModelFlagsTest, OpenRuntimeLoadsTheModelWithTheChosenOptions) {
  ModelFlags f;
  f.model = testing::Ds4TinyPath();
  f.threads = 1;
  f.numerics = "hf";
  f.act_quant = "off";
  Expected<ModelSetup> setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  Expected<std::unique_ptr<Runtime>> rt = OpenRuntime(f, *setup);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_EQ((*rt)->model().options().numerics, NumericsMode::kHf);
  EXPECT_EQ((*rt)->model().options().act_quant, ActQuantMode::kOff);

  f.backend = "tpu";
  EXPECT_FALSE(OpenRuntime(f, *setup).ok());
}

// --numerics fast needs tensor-core kernels: the CPU backend refuses it by name instead of
// computing exact numerics under the fast name.
TEST(ModelFlagsTest, TheCpuBackendRefusesFastNumerics) {
  ModelFlags f;
  f.model = testing::Ds4TinyPath();
  f.threads = 1;
  f.backend = "cpu";
  f.numerics = "fast";
  Expected<ModelSetup> setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  Expected<std::unique_ptr<Runtime>> rt = OpenRuntime(f, *setup);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(rt.status().message().find("--numerics fast"), std::string::npos)
      << rt.status().ToString();
  EXPECT_NE(rt.status().message().find("cpu backend"), std::string::npos) << rt.status().ToString();
}

TEST(ModelFlagsTest, CacheIdentityIsTheFingerprintAndTheNumerics) {
  ModelFlags f;
  f.model = testing::Ds4TinyPath();
  Expected<ModelSetup> setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  ASSERT_TRUE(setup->file.has_value());
  EXPECT_FALSE(setup->random.has_value());
  Expected<Sha1Digest> fingerprint = SetupFingerprint(*setup);
  ASSERT_TRUE(fingerprint.ok()) << fingerprint.status().ToString();
  EXPECT_EQ(*fingerprint, *ModelFingerprint(*setup->file));
  SnapshotIdentity id = CacheIdentity(*fingerprint, setup->options);
  EXPECT_EQ(id.model, *fingerprint);
  EXPECT_EQ(id.numerics, "official/q8");
  id = CacheIdentity(*fingerprint, ModelOptions{NumericsMode::kHf, ActQuantMode::kOff});
  EXPECT_EQ(id.numerics, "hf/off");
  // A state made on the fast path never restores into an exact session: another name.
  id = CacheIdentity(*fingerprint,
                     ModelOptions{NumericsMode::kOfficial, ActQuantMode::kQ8, FloatPath::kFast});
  EXPECT_EQ(id.numerics, "fast/q8");
}

// random: sources have no file: the shape's own fingerprint and the tokenizer of
// --tokenizer (here the ds4-tiny GGUF's, to keep the test small).
TEST(ModelFlagsTest, RandomSourcesOpenWithoutAFile) {
  ModelFlags f;
  f.model = "random:tiny:2";
  f.tokenizer = testing::Ds4TinyPath();
  Expected<ModelSetup> setup = OpenModel(f);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  EXPECT_FALSE(setup->file.has_value());
  EXPECT_EQ(setup->path, "random:tiny:2");
  Expected<RandomModelSpec> spec = ParseRandomModelSource("random:tiny:2");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(setup->random.has_value());
  EXPECT_EQ(*SetupFingerprint(*setup), RandomModelFingerprint(*spec));
  EXPECT_NE(setup->description.find(f.tokenizer), std::string::npos) << setup->description;
  EXPECT_FALSE(setup->tokenizer.Encode("Hello", /*allow_specials=*/false).empty());

  f.model = "random:nonsense";
  EXPECT_FALSE(OpenModel(f).ok());
  // A GGUF brings its own vocabulary: --tokenizer beside it is a mistake, said as such.
  f.model = testing::Ds4TinyPath();
  Expected<ModelSetup> both = OpenModel(f);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("--tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace flashkv::cli
