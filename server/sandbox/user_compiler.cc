#include "sandbox/user_compiler.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "jit/jit_key.h"

namespace kerneld::server::sandbox {

namespace {

// The name the program has in NVRTC's messages.
constexpr const char* kProgramName = "user_kernel.cu";
// Where a cached module keeps its ptxas report (CompiledModule's symbol list
// is the entry format's only free-form field; no kernel has this name).
constexpr const char* kPtxasTag = "kerneld:ptxas";

std::string ToolkitVersion(const std::string& include_dir) {
  if (include_dir.empty()) return "";
  std::ifstream in(include_dir + "/cuda_runtime_api.h");
  std::string line;
  const std::string tag = "#define CUDART_VERSION";
  while (std::getline(in, line))
    if (line.rfind(tag, 0) == 0) {
      std::string v = line.substr(tag.size());
      v.erase(0, v.find_first_not_of(" \t"));
      return v.substr(0, v.find_first_of(" \t\r"));
    }
  return "";
}

std::string ProgramLog(const jit::NvrtcApi& api, jit::NvrtcApi::Program prog) {
  size_t n = 0;
  if (api.get_program_log_size(prog, &n) != 0 || n <= 1) return "";
  std::string log(n, '\0');
  if (api.get_program_log(prog, log.data()) != 0) return "";
  log.resize(n - 1);
  return log;
}

// Only the "ptxas info" lines and the stack/spill line under each.
std::string PtxasLines(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("ptxas info") != std::string::npos ||
        line.find("bytes stack frame") != std::string::npos)
      out += line + "\n";
  return out;
}

int64_t NumberBefore(const std::string& line, const std::string& unit) {
  const size_t at = line.find(unit);
  if (at == std::string::npos || at == 0) return 0;
  size_t b = at;
  while (b > 0 && line[b - 1] == ' ') --b;
  size_t e = b;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
  if (b == e || e - b > 15) return 0;
  return std::stoll(line.substr(b, e - b));
}

Status Compile(const jit::NvrtcApi& api, const std::string& program,
               const std::vector<std::string>& exprs, const std::vector<std::string>& options,
               jit::CompiledModule* out, std::string* log) {
  jit::NvrtcApi::Program prog = nullptr;
  int r = api.create_program(&prog, program.c_str(), kProgramName, 0, nullptr, nullptr);
  if (r != 0) return Internal("nvrtcCreateProgram: " + api.ErrorName(r));
  auto destroy = [&api](jit::NvrtcApi::Program* p) { api.destroy_program(p); };
  std::unique_ptr<jit::NvrtcApi::Program, decltype(destroy)> guard(&prog, destroy);
  for (const auto& e : exprs)
    if ((r = api.add_name_expression(prog, e.c_str())) != 0)
      return Internal("nvrtcAddNameExpression(" + Quote(e) + "): " + api.ErrorName(r));
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  r = api.compile_program(prog, static_cast<int>(opts.size()), opts.data());
  *log = ProgramLog(api, prog);
  if (r != 0) return InvalidArgument(api.ErrorName(r));
  size_t size = 0;
  if ((r = api.get_cubin_size(prog, &size)) != 0 || size == 0)
    return Internal("nvrtcGetCUBINSize: " + api.ErrorName(r));
  out->cubin.resize(size);
  if ((r = api.get_cubin(prog, out->cubin.data())) != 0)
    return Internal("nvrtcGetCUBIN: " + api.ErrorName(r));
  for (const auto& e : exprs) {
    const char* lowered = nullptr;
    r = api.get_lowered_name(prog, e.c_str(), &lowered);
    if (r != 0 || lowered == nullptr)
      return InvalidArgument("entry " + Quote(e) + " is not a __global__ function of the source");
    out->symbols.emplace_back(e, lowered);
  }
  out->symbols.emplace_back(kPtxasTag, PtxasLines(*log));
  return Status::Ok();
}

}  // namespace

std::string CutLog(const std::string& log, size_t max) {
  if (log.size() <= max) return log;
  size_t cut = log.rfind('\n', max);
  if (cut == std::string::npos || cut < max / 2) cut = max;
  return log.substr(0, cut) + "\n... (" + std::to_string(log.size() - cut) + " more bytes)";
}

Status CheckIncludes(const std::string& source) {
  // Lines as the preprocessor sees them: backslash-newlines joined.
  std::string joined;
  joined.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\\' && i + 1 < source.size() && source[i + 1] == '\n') {
      ++i;
      continue;
    }
    joined += source[i];
  }
  std::istringstream in(joined);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    size_t p = line.find_first_not_of(" \t\r\f\v");
    if (p == std::string::npos || line[p] != '#') continue;
    const std::string rest = line.substr(p + 1);
    const bool directive_like = rest.find("include") != std::string::npos ||
                                rest.find("import") != std::string::npos ||
                                rest.find("embed") != std::string::npos;
    if (!directive_like) continue;
    // Exactly: #include <name>, name of [A-Za-z0-9_./-], relative, no "..".
    size_t q = rest.find_first_not_of(" \t");
    bool ok = q != std::string::npos && rest.compare(q, 7, "include") == 0;
    std::string name;
    if (ok) {
      q = rest.find_first_not_of(" \t", q + 7);
      ok = q != std::string::npos && rest[q] == '<';
      const size_t close = ok ? rest.find('>', q) : std::string::npos;
      ok = ok && close != std::string::npos;
      if (ok) {
        name = rest.substr(q + 1, close - q - 1);
        const std::string tail = rest.substr(close + 1);
        const size_t t = tail.find_first_not_of(" \t\r");
        ok = t == std::string::npos || tail.compare(t, 2, "//") == 0;
      }
    }
    ok = ok && !name.empty() && name[0] != '/' && name.find("..") == std::string::npos;
    for (char c : name)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
                  c == '-');
    if (!ok)
      return InvalidArgument("cuda_source line " + std::to_string(n) + ": " +
                             Quote(line.substr(p, 80)) +
                             ": only #include <toolkit_header> is allowed (cuda_fp16.h, "
                             "cuda_bf16.h, cuda/std/...); quoted, absolute and macro includes, "
                             "#import and #embed are refused");
  }
  return Status::Ok();
}

std::vector<v1::KernelResources> ParsePtxasInfo(
    const std::string& log, const std::string& arch,
    const std::vector<std::pair<std::string, std::string>>& symbols) {
  std::vector<v1::KernelResources> out;
  std::istringstream in(log);
  std::string line;
  v1::KernelResources* cur = nullptr;
  while (std::getline(in, line)) {
    const std::string tag = "Compiling entry function '";
    if (size_t at = line.find(tag); at != std::string::npos) {
      const size_t b = at + tag.size(), e = line.find('\'', b);
      if (e == std::string::npos) continue;
      const std::string lowered = line.substr(b, e - b);
      cur = &out.emplace_back();
      cur->set_arch(arch);
      cur->set_function(lowered);
      for (const auto& [expr, sym] : symbols)
        if (sym == lowered) cur->set_function(expr);
      continue;
    }
    if (cur == nullptr) continue;
    if (line.find("bytes stack frame") != std::string::npos) {
      cur->set_stack_bytes(NumberBefore(line, "bytes stack frame"));
      cur->set_spill_store_bytes(NumberBefore(line, "bytes spill stores"));
      cur->set_spill_load_bytes(NumberBefore(line, "bytes spill loads"));
    } else if (line.find("Used ") != std::string::npos) {
      cur->set_registers(static_cast<int32_t>(NumberBefore(line, "registers")));
      cur->set_shared_bytes(NumberBefore(line, "bytes smem"));
      cur->set_constant_bytes(NumberBefore(line, "bytes cmem[0]"));
    }
  }
  return out;
}

Status CompileUserKernel(const jit::NvrtcApi& nvrtc, jit::DiskCache* cache,
                         const UserKernelSpec& spec, const std::string& source,
                         const std::string& arch, CompiledUserKernel* out) {
  *out = CompiledUserKernel();
  out->arch = arch;
  const int cc = jit::ArchComputeCapability(arch);
  if (cc < 0 || !nvrtc.SupportsArch(cc))
    return InvalidArgument(spec.name + ": NVRTC " + nvrtc.VersionString() + " cannot compile for " +
                           Quote(arch));
  KERNELD_RETURN_IF_ERROR(CheckIncludes(source));
  jit::KeyParts parts;
  // The #line puts the checks' errors after the client's lines, by name.
  parts.program = source + "\n#line 1 \"kerneld_signature_check\"\n" + SignatureChecks(spec);
  for (const auto& inst : EntryInstantiations(spec)) parts.name_expressions.push_back(inst.second);
  parts.options = jit::BaseOptions();
  parts.options.push_back("--gpu-architecture=" + arch);
  parts.options.push_back("--ptxas-options=-v");
  parts.options.insert(parts.options.end(), spec.compile_options.begin(),
                       spec.compile_options.end());
  parts.arch = arch;
  parts.nvrtc_version = nvrtc.VersionString();
  parts.toolkit_version = ToolkitVersion(nvrtc.toolkit_include);
  out->key = jit::MakeKey(parts);
  std::vector<std::string> options = parts.options;
  if (!nvrtc.toolkit_include.empty()) options.push_back("-I" + nvrtc.toolkit_include);
  if (!nvrtc.cccl_include.empty()) options.push_back("-I" + nvrtc.cccl_include);

  std::string log;
  Status compile_status;
  auto compile = [&](jit::CompiledModule* m) {
    compile_status = Compile(nvrtc, parts.program, parts.name_expressions, options, m, &log);
    return compile_status;
  };
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  if (cache != nullptr) {
    st = cache->GetOrCompile(out->key, compile, &out->module, &out->cache_hit);
  } else {
    st = compile(&out->module);
  }
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out->log = CutLog(log, kMaxLogBytes);
  if (!st.ok()) {
    if (st.code() != StatusCode::kInvalidArgument) return st;
    std::string msg = spec.name + ": NVRTC " + nvrtc.VersionString() + " could not compile " +
                      Quote(spec.entry) + " for " + arch + ": " + st.message();
    if (!log.empty()) msg += "\n" + CutLog(log, 1400);
    if (nvrtc.toolkit_include.empty()) msg += "\n(no CUDA toolkit include directory was found)";
    return InvalidArgument(msg);
  }
  const std::string ptxas = out->module.Symbol(kPtxasTag);
  if (out->log.empty()) out->log = ptxas;  // a cache hit: the report, as compiled then
  out->resources = ParsePtxasInfo(ptxas, arch, out->module.symbols);
  return Status::Ok();
}

}  // namespace kerneld::server::sandbox
