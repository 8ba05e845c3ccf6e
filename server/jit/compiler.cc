#include "jit/compiler.h"

#include <cctype>
#include <fstream>
#include <memory>
#include <sstream>

namespace kerneld::server::jit {

namespace {

// The name NVRTC gives the program in its messages.
constexpr const char* kProgramName = "kerneld_jit.cu";

// CUDART_VERSION of the toolkit headers NVRTC will read, "" when unknown.
std::string ToolkitVersion(const std::string& include_dir) {
  if (include_dir.empty()) return "";
  std::ifstream in(include_dir + "/cuda_runtime_api.h");
  std::string line;
  while (std::getline(in, line)) {
    const std::string tag = "#define CUDART_VERSION";
    if (line.rfind(tag, 0) == 0) {
      std::string v = line.substr(tag.size());
      v.erase(0, v.find_first_not_of(" \t"));
      return v.substr(0, v.find_first_of(" \t\r"));
    }
  }
  return "";
}

std::string Log(const NvrtcApi& api, NvrtcApi::Program prog) {
  size_t n = 0;
  if (api.get_program_log_size(prog, &n) != 0 || n <= 1) return "";
  std::string log(n, '\0');
  if (api.get_program_log(prog, log.data()) != 0) return "";
  log.resize(n - 1);  // the terminating NUL
  return log;
}

// The first lines of a compile log, for a status message (the whole log
// goes to the caller's log).
std::string LogHead(const std::string& log, size_t max_bytes = 1200) {
  if (log.size() <= max_bytes) return log;
  size_t cut = log.rfind('\n', max_bytes);
  return log.substr(0, cut == std::string::npos ? max_bytes : cut) + "\n...";
}

}  // namespace

std::string CompiledModule::Symbol(const std::string& name_expression) const {
  for (const auto& [expr, sym] : symbols)
    if (expr == name_expression) return sym;
  return "";
}

int ArchComputeCapability(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return -1;
  size_t i = 3;
  int cc = 0;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])) && cc < 10000)
    cc = cc * 10 + (arch[i++] - '0');
  if (i == 3 || cc < 10) return -1;
  // A suffix: "a" (arch-specific features), "f" (family).
  if (i < arch.size() && !(i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f'))) return -1;
  return cc;
}

const std::vector<std::string>& BaseOptions() {
  // nvcc's --expt-relaxed-constexpr has no NVRTC spelling, and needs none:
  // NVRTC compiles device code only.
  static const std::vector<std::string> opts = {"-std=c++20"};
  return opts;
}

Status Compiler::Prepare(const KernelSpec& spec, Program* out) const {
  *out = Program();
  const int cc = ArchComputeCapability(spec.arch);
  if (cc < 0)
    return InvalidArgument("JIT arch " + Quote(spec.arch) +
                           " is not of the form sm_<major><minor> (sm_90, sm_90a, sm_100)");
  if (!api_->SupportsArch(cc))
    return InvalidArgument("NVRTC " + api_->VersionString() + " cannot compile for " +
                           Sanitize(spec.arch));
  if (spec.kernels.empty())
    return InvalidArgument("JIT compile of " + Quote(spec.header) + " names no kernel");
  for (const std::string& k : spec.kernels)
    if (k.empty())
      return InvalidArgument("JIT compile of " + Quote(spec.header) + ": empty kernel name");
  SourceClosure sources;
  if (Status s = CollectSources(*tree_, spec.header, &sources); !s.ok()) return s;
  KeyParts& p = out->parts;
  p.program = "#include \"" + spec.header + "\"\n";
  p.headers = std::move(sources.headers);
  p.toolkit_headers = std::move(sources.toolkit);
  p.name_expressions = spec.kernels;
  p.options = BaseOptions();
  p.options.push_back("--gpu-architecture=" + spec.arch);
  p.options.insert(p.options.end(), spec.options.begin(), spec.options.end());
  p.arch = spec.arch;
  p.nvrtc_version = api_->VersionString();
  p.toolkit_version = ToolkitVersion(api_->toolkit_include);
  if (!api_->toolkit_include.empty()) out->include_options.push_back("-I" + api_->toolkit_include);
  if (!api_->cccl_include.empty()) out->include_options.push_back("-I" + api_->cccl_include);
  out->key = MakeKey(p);
  return Status::Ok();
}

Status Compiler::Compile(const Program& program, CompiledModule* out, std::string* log) const {
  *out = CompiledModule();
  const KeyParts& p = program.parts;
  std::vector<const char*> names, bodies;
  for (const auto& [name, text] : p.headers) {
    names.push_back(name.c_str());
    bodies.push_back(text.c_str());
  }
  NvrtcApi::Program prog = nullptr;
  int r = api_->create_program(&prog, p.program.c_str(), kProgramName,
                               static_cast<int>(names.size()), bodies.data(), names.data());
  if (r != 0) return Internal("nvrtcCreateProgram: " + api_->ErrorName(r));
  auto destroy = [this](NvrtcApi::Program* pp) { api_->destroy_program(pp); };
  std::unique_ptr<NvrtcApi::Program, decltype(destroy)> guard(&prog, destroy);
  for (const std::string& k : p.name_expressions) {
    r = api_->add_name_expression(prog, k.c_str());
    if (r != 0) return Internal("nvrtcAddNameExpression(" + Quote(k) + "): " + api_->ErrorName(r));
  }
  std::vector<const char*> opts;
  for (const std::string& o : p.options) opts.push_back(o.c_str());
  for (const std::string& o : program.include_options) opts.push_back(o.c_str());
  r = api_->compile_program(prog, static_cast<int>(opts.size()), opts.data());
  const std::string text = Log(*api_, prog);
  if (log != nullptr) *log = text;
  if (r != 0) {
    std::string what = p.name_expressions.front();
    if (p.name_expressions.size() > 1)
      what += " and " + std::to_string(p.name_expressions.size() - 1) + " more";
    std::string msg = "NVRTC " + api_->VersionString() + " could not compile " + what + " from " +
                      p.program.substr(9, p.program.size() - 10) + " for " + p.arch + ": " +
                      api_->ErrorName(r);
    if (!text.empty()) msg += "\n" + LogHead(text);
    if (program.include_options.empty())
      msg += "\n(no CUDA toolkit include directory was found beside " + api_->library +
             ", in $CUDA_HOME, $CUDA_PATH or /usr/local/cuda)";
    return {StatusCode::kInternal, msg};
  }
  size_t size = 0;
  r = api_->get_cubin_size(prog, &size);
  if (r != 0 || size == 0) return Internal("nvrtcGetCUBINSize: " + api_->ErrorName(r));
  out->cubin.resize(size);
  r = api_->get_cubin(prog, out->cubin.data());
  if (r != 0) return Internal("nvrtcGetCUBIN: " + api_->ErrorName(r));
  for (const std::string& k : p.name_expressions) {
    const char* lowered = nullptr;
    r = api_->get_lowered_name(prog, k.c_str(), &lowered);
    if (r != 0 || lowered == nullptr)
      return Internal("nvrtcGetLoweredName(" + Quote(k) + "): " + api_->ErrorName(r));
    out->symbols.emplace_back(k, lowered);
  }
  return Status::Ok();
}

}  // namespace kerneld::server::jit
