// RegisterKernel's spec: names, dtypes, shape rules, attrs, the launch rule
// and compile options are checked, bounded, and refused with a message
// that names the field.
#include <gtest/gtest.h>

#include "kerneld/check.h"
#include "sandbox/kernel_spec.h"

namespace kerneld::server::sandbox {
namespace {

v1::RegisterKernelRequest ScaleRequest() {
  v1::RegisterKernelRequest r;
  r.set_name("my_scale");
  r.set_cuda_source(
      "extern \"C\" __global__ void my_scale(const float* x, float* y, long long n, "
      "float f) {}");
  r.set_entry("my_scale");
  auto* x = r.add_inputs();
  x->set_name("x");
  x->add_dtypes(v1::DTYPE_FLOAT32);
  x->set_shape("[n]");
  auto* y = r.add_outputs();
  y->set_name("y");
  y->set_shape("same as 'x'");
  auto* f = r.add_attrs();
  f->set_name("factor");
  f->set_type("float");
  f->set_required(true);
  r.set_launch("grid = ceil(n / 256), block = 256");
  return r;
}

Status Parse(const v1::RegisterKernelRequest& r) {
  UserKernelSpec s;
  return ParseKernelSpec(r, &s);
}

TEST(UserKernelSpec, ScaleParsesAndBuildsAnOp) {
  UserKernelSpec s;
  ASSERT_TRUE(ParseKernelSpec(ScaleRequest(), &s).ok());
  EXPECT_EQ(s.symbols, std::vector<std::string>{"n"});
  EXPECT_EQ(EntrySignature(s, DType::kInvalid),
            "void(const float* x, float* y, int64_t n, float factor)");
  OpDef op = BuildOpDef(s);
  EXPECT_EQ(op.name, "my_scale");
  ASSERT_EQ(op.inputs.size(), 1u);
  ASSERT_EQ(op.outputs.size(), 1u);
  EXPECT_EQ(op.outputs[0].rule.description, SameAs("x").description);
  LaunchDims d;
  ASSERT_TRUE(s.launch
                  .Eval(
                      [](const std::string& n, int64_t* v) {
                        *v = 1000;
                        return n == "n";
                      },
                      &d)
                  .ok());
  EXPECT_EQ(d.grid[0], 4);
  EXPECT_EQ(d.block[0], 256);
}

TEST(UserKernelSpec, RefusesBadNamesWithTheField) {
  auto r = ScaleRequest();
  r.set_name("Scale");
  EXPECT_NE(Parse(r).message().find("[a-z0-9_]"), std::string::npos);
  r.set_name("_test_x");
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
  r.set_name(std::string(65, 'a'));
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
  r = ScaleRequest();
  r.mutable_inputs(0)->set_name("y");  // the output's name too
  EXPECT_NE(Parse(r).message().find("used twice"), std::string::npos) << Parse(r).message();
  r = ScaleRequest();
  r.set_entry("my scale");
  EXPECT_NE(Parse(r).message().find("entry"), std::string::npos);
  r.set_entry("a:b");
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
}

TEST(UserKernelSpec, ShapeRules) {
  ShapePattern p;
  EXPECT_TRUE(ParseShapePattern("x", "[rows, 2*d]", &p).ok());
  ASSERT_EQ(p.dims.size(), 2u);
  EXPECT_EQ(p.dims[1].value, 2);
  EXPECT_EQ(p.dims[1].symbol, "d");
  EXPECT_TRUE(ParseShapePattern("x", "[..., h]", &p).ok());
  EXPECT_TRUE(ParseShapePattern("x", "[]", &p).ok());
  for (const char* bad : {"n", "[n", "[..., ...]", "[0*n]", "[-1]", "[2*]", "[a b]", "[1,,2]",
                          "[1, 2, 3, 4, 5, 6, 7, 8, 9]", "[99999999999999]", "[9999999*n]"}) {
    Status st = ParseShapePattern("input 'x'", bad, &p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("input 'x'"), std::string::npos) << st.message();
  }
  // Outputs: symbols must be bound by the inputs.
  auto r = ScaleRequest();
  r.mutable_outputs(0)->set_shape("[m]");
  EXPECT_NE(Parse(r).message().find("not bound"), std::string::npos) << Parse(r).message();
  r.mutable_outputs(0)->set_shape("same as 'z'");
  EXPECT_NE(Parse(r).message().find("names no input"), std::string::npos);
  r.mutable_outputs(0)->set_shape("[...]");
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
}

TEST(UserKernelSpec, DTypesAndTemplates) {
  auto r = ScaleRequest();
  r.mutable_inputs(0)->add_dtypes(v1::DTYPE_FLOAT16);
  EXPECT_NE(Parse(r).message().find("template"), std::string::npos) << Parse(r).message();
  r.set_entry("my_scale<T>");
  UserKernelSpec s;
  ASSERT_TRUE(ParseKernelSpec(r, &s).ok());
  auto inst = EntryInstantiations(s);
  ASSERT_EQ(inst.size(), 2u);
  EXPECT_EQ(inst[0].second, "my_scale<__half>");
  EXPECT_EQ(inst[1].second, "my_scale<float>");
  EXPECT_EQ(EntrySignature(s, DType::kFloat16),
            "void(const __half* x, __half* y, int64_t n, float factor)");
  r.mutable_inputs(0)->add_dtypes(static_cast<v1::DType>(99));
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
  r = ScaleRequest();
  r.mutable_inputs(0)->clear_dtypes();
  EXPECT_NE(Parse(r).message().find("at least one dtype"), std::string::npos);
}

TEST(UserKernelSpec, Attrs) {
  auto r = ScaleRequest();
  r.mutable_attrs(0)->set_type("string");
  EXPECT_NE(Parse(r).message().find("float, int or bool"), std::string::npos);
  r = ScaleRequest();
  r.mutable_attrs(0)->set_required(false);
  EXPECT_NE(Parse(r).message().find("default_value"), std::string::npos);
  r.mutable_attrs(0)->mutable_default_value()->set_b(true);
  EXPECT_NE(Parse(r).message().find("another type"), std::string::npos);
  r.mutable_attrs(0)->mutable_default_value()->set_f(2.0);
  EXPECT_TRUE(Parse(r).ok());
  r.mutable_attrs(0)->set_name("n");  // a shape symbol's name
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
}

TEST(UserKernelSpec, CompileOptionsFromTheAllowedSet) {
  auto r = ScaleRequest();
  r.mutable_options()->add_compile_options("-DTILE=32");
  r.mutable_options()->add_compile_options("--use_fast_math");
  EXPECT_TRUE(Parse(r).ok());
  for (const char* bad : {"-I/etc", "--include-path=/", "-DX\n", "--pre-include=/etc/passwd",
                          "-D=1", "--maxrregcount=abc"}) {
    auto b = ScaleRequest();
    b.mutable_options()->add_compile_options(bad);
    EXPECT_EQ(Parse(b).code(), StatusCode::kInvalidArgument) << bad;
  }
  r.mutable_options()->set_arch("compute_90");
  EXPECT_EQ(Parse(r).code(), StatusCode::kInvalidArgument);
}

TEST(UserKernelSpec, SourceBounds) {
  auto r = ScaleRequest();
  r.set_cuda_source(std::string(kMaxSourceBytes + 1, ' '));
  EXPECT_NE(Parse(r).message().find("256 KiB"), std::string::npos);
  r.set_cuda_source(std::string("a\0b", 3));
  EXPECT_NE(Parse(r).message().find("NUL"), std::string::npos);
}

Status Rule(const std::string& text, LaunchDims* d, int64_t n = 1000) {
  LaunchRule rule;
  KERNELD_RETURN_IF_ERROR(LaunchRule::Parse(text, {"n", "rows", "cols"}, &rule));
  return rule.Eval(
      [n](const std::string& s, int64_t* v) {
        *v = s == "n" ? n : s == "rows" ? 7 : 100;
        return true;
      },
      d);
}

TEST(UserKernelLaunchRule, Forms) {
  LaunchDims d;
  ASSERT_TRUE(Rule("grid = (ceil(cols / 32), rows), block = (32, 8), shared = 4 * 32", &d).ok());
  EXPECT_EQ(d.grid[0], 4);
  EXPECT_EQ(d.grid[1], 7);
  EXPECT_EQ(d.block[1], 8);
  EXPECT_EQ(d.shared_bytes, 128);
  ASSERT_TRUE(Rule("block = 128, grid = min(max((n + 127) / 128, 1), 64)", &d).ok());
  EXPECT_EQ(d.grid[0], 8);
  ASSERT_TRUE(Rule("grid = ceil(n / 256), block = 256", &d, 0).ok());
  EXPECT_TRUE(d.empty());
  ASSERT_TRUE(Rule("grid = -7 % 3 + 2, block = 1", &d).ok());
  EXPECT_EQ(d.grid[0], 4);  // floor modulo: 2 + 2
}

TEST(UserKernelLaunchRule, RefusesWithAReason) {
  LaunchDims d;
  struct Case {
    const char* rule;
    const char* says;
  } cases[] = {
      {"grid = n", "needs both"},
      {"grid = n, block = 256, grid = 1", "twice"},
      {"grid = m, block = 1", "unknown symbol"},
      {"grid = sqrt(n), block = 1", "unknown function"},
      {"grid = n / 0, block = 1", "division by zero"},
      {"grid = n, block = 2048", "1..1024"},
      {"grid = n, block = (64, 64)", "at most 1024"},
      {"grid = n * n * n * n * n * n * n, block = 1", "overflow"},
      {"grid = (n, n, n), block = 1", "blocks"},
      {"grid = -1, block = 1", "0.."},
      {"grid = 1, block = 1, shared = 1000000", "shared"},
      {"grid = (1, 2, 3, 4), block = 1", "at most 3"},
      {"grid = 1, block = 1 junk", "unexpected"},
      {"grid = ((((((((((((((((((1)))))))))))))))))), block = 1", "nested"},
  };
  for (const auto& c : cases) {
    Status st = Rule(c.rule, &d);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.rule;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.rule << ": " << st.message();
  }
  LaunchRule rule;
  EXPECT_EQ(LaunchRule::Parse(std::string(600, ' '), {}, &rule).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kerneld::server::sandbox
