#include "jit/nvrtc_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kerneld::server::jit {

namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// dlopen candidates when no path is named: the sonames on the loader path
// (LD_LIBRARY_PATH, ld.so.cache: how the CUDA images expose it), then the
// usual toolkit directories, which a plain install leaves off that path.
std::vector<std::string> Candidates() {
  static const char* kNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  std::vector<std::string> out(std::begin(kNames), std::end(kNames));
  for (const std::string& root :
       {Env("CUDA_HOME"), Env("CUDA_PATH"), std::string("/usr/local/cuda")}) {
    if (root.empty()) continue;
    for (const char* n : kNames) {
      const fs::path p = fs::path(root) / "lib64" / n;
      if (IsFile(p)) out.push_back(p.string());
    }
  }
  return out;
}

template <typename F>
bool Resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return *fn != nullptr;
}

// The resolved file of a dlopen handle (a soname on the loader path says
// nothing about where the toolkit is).
std::string LibraryPath(void* lib, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    std::error_code ec;
    const fs::path p = fs::canonical(map->l_name, ec);
    return ec ? std::string(map->l_name) : p.string();
  }
  return fallback;
}

std::unique_ptr<NvrtcApi> Open(const std::string& file, std::string* err) {
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    *err = e ? e : "dlopen failed";
    return nullptr;
  }
  auto api = std::make_unique<NvrtcApi>();
  std::string missing;
  Resolve(lib, "nvrtcVersion", &api->version, &missing);
  Resolve(lib, "nvrtcCreateProgram", &api->create_program, &missing);
  Resolve(lib, "nvrtcDestroyProgram", &api->destroy_program, &missing);
  Resolve(lib, "nvrtcCompileProgram", &api->compile_program, &missing);
  Resolve(lib, "nvrtcGetCUBINSize", &api->get_cubin_size, &missing);
  Resolve(lib, "nvrtcGetCUBIN", &api->get_cubin, &missing);
  Resolve(lib, "nvrtcGetProgramLogSize", &api->get_program_log_size, &missing);
  Resolve(lib, "nvrtcGetProgramLog", &api->get_program_log, &missing);
  Resolve(lib, "nvrtcAddNameExpression", &api->add_name_expression, &missing);
  Resolve(lib, "nvrtcGetLoweredName", &api->get_lowered_name, &missing);
  Resolve(lib, "nvrtcGetErrorString", &api->get_error_string, &missing);
  Resolve(lib, "nvrtcGetNumSupportedArchs", &api->get_num_supported_archs, &missing);
  Resolve(lib, "nvrtcGetSupportedArchs", &api->get_supported_archs, &missing);
  api->library = LibraryPath(lib, file);
  if (!missing.empty()) {
    // NVRTC before 11.2 has no nvrtcGetCUBIN: too old to make a CUBIN.
    *err = api->library + " lacks " + missing + " (NVRTC 11.2 or newer is needed)";
    dlclose(lib);
    return nullptr;
  }
  if (api->version(&api->major, &api->minor) != 0) {
    *err = api->library + ": nvrtcVersion failed";
    dlclose(lib);
    return nullptr;
  }
  api->toolkit_include = FindToolkitInclude(api->library);
  if (!api->toolkit_include.empty()) {
    // libcu++ moved under include/cccl in CUDA 13; CUDA 12 has it in include.
    const fs::path cccl = fs::path(api->toolkit_include) / "cccl";
    if (IsFile(cccl / "cuda" / "std" / "cstdint")) api->cccl_include = cccl.string();
  }
  return api;
}

}  // namespace

std::string NvrtcApi::ErrorName(int result) const {
  const char* s = get_error_string ? get_error_string(result) : nullptr;
  return std::string(s ? s : "NVRTC_ERROR") + " (" + std::to_string(result) + ")";
}

bool NvrtcApi::SupportsArch(int cc) const {
  int n = 0;
  if (get_num_supported_archs(&n) != 0 || n <= 0) return false;
  std::vector<int> archs(static_cast<size_t>(n));
  if (get_supported_archs(archs.data()) != 0) return false;
  for (int a : archs)
    if (a == cc) return true;
  return false;
}

std::string FindToolkitInclude(const std::string& library_path) {
  auto has_runtime = [](const fs::path& inc) { return IsFile(inc / "cuda_runtime.h"); };
  // <root>/lib64/libnvrtc.so, <root>/targets/<arch>/lib/libnvrtc.so: the
  // include directory of the toolkit that shipped this NVRTC.
  if (!library_path.empty()) {
    fs::path dir = fs::path(library_path).parent_path();
    for (int up = 0; up < 4 && !dir.empty() && dir != dir.root_path(); ++up) {
      dir = dir.parent_path();
      if (has_runtime(dir / "include")) return (dir / "include").string();
    }
  }
  for (const std::string& root :
       {Env("CUDA_HOME"), Env("CUDA_PATH"), std::string("/usr/local/cuda")}) {
    if (!root.empty() && has_runtime(fs::path(root) / "include"))
      return (fs::path(root) / "include").string();
  }
  return "";
}

const NvrtcApi* LoadNvrtc(const std::string& path, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<NvrtcApi>>* loaded =
      new std::map<std::string,
                   std::unique_ptr<NvrtcApi>>();  // never destroyed: handed-out pointers stay valid
  const std::string named = !path.empty() ? path : Env(kNvrtcLibraryEnv);
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(named);
  if (it != loaded->end()) return it->second.get();
  std::vector<std::string> tried;
  const std::vector<std::string> candidates =
      named.empty() ? Candidates() : std::vector<std::string>{named};
  for (const std::string& c : candidates) {
    std::string err;
    std::unique_ptr<NvrtcApi> api = Open(c, &err);
    if (api) return loaded->emplace(named, std::move(api)).first->second.get();
    tried.push_back(err);
  }
  if (why != nullptr) {
    std::string list;
    for (const std::string& t : tried) list += (list.empty() ? "" : "; ") + t;
    *why = "libnvrtc not found: " + list +
           " (install the CUDA toolkit's NVRTC, put its lib directory on the loader path, or name "
           "the file in $" +
           kNvrtcLibraryEnv + ")";
  }
  return nullptr;
}

}  // namespace kerneld::server::jit
