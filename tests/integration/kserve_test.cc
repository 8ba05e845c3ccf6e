// The KServe v2 front end (inference.GRPCInferenceService, docs/kserve.md)
// against the real daemon on loopback, with hostile inputs: every one is
// answered with the protocol's status code and a bounded message that says
// what is wrong, on the callback and the sync API, and the daemon goes on
// serving (the fixture fails the test on a sanitizer report).
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <condition_variable>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>

#include "daemon_fixture.h"
#include "inference/grpc_service.grpc.pb.h"

namespace kerneld::testing {
namespace {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

constexpr size_t kMaxMessage = 2200;  // kMaxStatusMessage and its "… (N bytes cut)"

class KServe {
 public:
  explicit KServe(const Daemon& d)
      : channel_(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials())),
        stub_(GRPCInferenceService::NewStub(channel_)) {}

  grpc::Status Infer(const ModelInferRequest& req, ModelInferResponse* resp = nullptr) {
    ModelInferResponse ignored;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->ModelInfer(&ctx, req, resp ? resp : &ignored);
  }
  template <class Req, class Resp>
  grpc::Status Call(grpc::Status (GRPCInferenceService::Stub::*m)(grpc::ClientContext*, const Req&,
                                                                  Resp*),
                    const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return (stub_.get()->*m)(&ctx, req, resp);
  }
  // `bytes` as the message of `method` (not a valid message, on purpose).
  grpc::Status Raw(const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer req(&slice, 1), resp;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, "/inference.GRPCInferenceService/" + method, grpc::StubOptions(), &req,
                   &resp, [&](grpc::Status st) { done.set_value(std::move(st)); });
    return done.get_future().get();
  }
  bool Live() {
    inference::ServerLiveResponse r;
    return Call(&GRPCInferenceService::Stub::ServerLive, inference::ServerLiveRequest(), &r).ok() &&
           r.live();
  }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  GRPCInferenceService::Stub& stub() { return *stub_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

ModelInferRequest::InferInputTensor* Input(ModelInferRequest* r, const std::string& name,
                                           const std::string& datatype,
                                           std::vector<int64_t> shape) {
  auto* t = r->add_inputs();
  t->set_name(name);
  t->set_datatype(datatype);
  for (int64_t d : shape) t->add_shape(d);
  return t;
}

// scale of x = [n] FP32 ones, factor 2, its bytes in raw_input_contents.
ModelInferRequest Scale(int n = 4) {
  ModelInferRequest r;
  r.set_model_name("scale");
  Input(&r, "x", "FP32", {n});
  std::vector<float> x(static_cast<size_t>(n), 1.0f);
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  (*r.mutable_parameters())["factor"].set_double_param(2.0);
  return r;
}

#define EXPECT_KSERVE(st, code, text)                                                       \
  do {                                                                                      \
    const grpc::Status s_ = (st);                                                           \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message();               \
    EXPECT_NE(s_.error_message().find(text), std::string::npos) << s_.error_message();      \
    EXPECT_LE(s_.error_message().size(), kMaxMessage) << s_.error_message().substr(0, 200); \
  } while (0)

class KServeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    d_ = std::make_unique<Daemon>(std::vector<std::string>{"--grpc_api=" + GetParam()});
    ASSERT_TRUE(d_->ok()) << d_->Log();
    k_ = std::make_unique<KServe>(*d_);
  }
  void TearDown() override {
    if (k_) {
      EXPECT_TRUE(k_->Live()) << "the daemon stopped serving";
    }
    k_.reset();
    if (d_) {
      EXPECT_EQ(d_->Terminate(), 0) << d_->Log();
    }
  }
  std::unique_ptr<Daemon> d_;
  std::unique_ptr<KServe> k_;
};

TEST_P(KServeTest, InferScaleRaw) {
  ModelInferResponse resp;
  ModelInferRequest req = Scale(5);
  req.set_id("one");
  ASSERT_TRUE(k_->Infer(req, &resp).ok());
  EXPECT_EQ(resp.model_name(), "scale");
  EXPECT_EQ(resp.model_version(), "1");
  EXPECT_EQ(resp.id(), "one");
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  ASSERT_EQ(resp.raw_output_contents(0).size(), 20u);
  float y[5];
  std::memcpy(y, resp.raw_output_contents(0).data(), sizeof y);
  for (float v : y) EXPECT_EQ(v, 2.0f);
}

TEST_P(KServeTest, WrongDatatype) {
  ModelInferRequest req = Scale();
  req.mutable_inputs(0)->set_datatype("INT32");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "'x' dtype int32 not in");
  req.mutable_inputs(0)->set_datatype("FP99");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "datatype 'FP99' is not one kerneld has");
  req.mutable_inputs(0)->set_datatype("BYTES");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "use one of BOOL");
}

TEST_P(KServeTest, MissingInputAndData) {
  ModelInferRequest req;
  req.set_model_name("rmsnorm");
  Input(&req, "x", "FP32", {2, 4});
  req.add_raw_input_contents(std::string(32, '\0'));
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "weight");
  req = Scale();
  req.clear_raw_input_contents();
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "'x' has no data");
  req = Scale();
  req.add_raw_input_contents("extra");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "2 raw_input_contents, but 1 inputs take one");
  req = Scale();
  *req.add_inputs() = req.inputs(0);  // x twice
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "appears twice");
}

TEST_P(KServeTest, UnknownModelAndVersion) {
  ModelInferRequest req = Scale();
  req.set_model_name("no_such_op");
  EXPECT_KSERVE(k_->Infer(req), NOT_FOUND, "unknown model 'no_such_op'");
  req.set_model_name("");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "model_name is empty");
  req.set_model_name("_test_sleep");  // test ops are not served by default
  EXPECT_KSERVE(k_->Infer(req), NOT_FOUND, "unknown model");
  req = Scale();
  req.set_model_version("7");
  EXPECT_KSERVE(k_->Infer(req), NOT_FOUND, "no version '7'");
}

TEST_P(KServeTest, BadParameters) {
  ModelInferRequest req = Scale();
  (*req.mutable_parameters())["factor"].set_string_param("two");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "attr 'factor' must be float");
  (*req.mutable_parameters())["factor"].Clear();
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "parameter 'factor' has no value");
  (*req.mutable_parameters())["factor"].set_uint64_param(std::numeric_limits<uint64_t>::max());
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "beyond an int attr's range");
  req = Scale();
  (*req.mutable_parameters())["nope"].set_int64_param(1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "unknown attr 'nope'");
  req = Scale();
  req.mutable_parameters()->erase("factor");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "missing required attr 'factor'");
  req = Scale();
  (*req.mutable_parameters())["kerneld.backend"].set_int64_param(1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "takes a string_param");
  (*req.mutable_parameters())["kerneld.backend"].set_string_param("warp_drive");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "warp_drive");  // as Execute answers it
  req = Scale();
  (*req.mutable_inputs(0)->mutable_parameters())["shared_memory_offset"].set_int64_param(-1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "non-negative");
  req = Scale();
  (*req.mutable_inputs(0)->mutable_parameters())["color"].set_string_param("red");
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "unknown parameter 'color'");
  // The protocol's own parameters are not attrs.
  req = Scale();
  (*req.mutable_parameters())["priority"].set_uint64_param(1);
  (*req.mutable_parameters())["timeout"].set_int64_param(1000000);
  EXPECT_TRUE(k_->Infer(req).ok());
}

TEST_P(KServeTest, OverflowingShapes) {
  ModelInferRequest req = Scale();
  req.mutable_inputs(0)->clear_shape();
  req.mutable_inputs(0)->add_shape(int64_t{1} << 62);
  req.mutable_inputs(0)->add_shape(4);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "'x'");
  req.mutable_inputs(0)->clear_shape();
  req.mutable_inputs(0)->add_shape(-1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "'x'");
  req.mutable_inputs(0)->clear_shape();
  for (int i = 0; i < 100000; ++i) req.mutable_inputs(0)->add_shape(1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "rank 100000");
  // Typed contents whose count or range is wrong, with no allocation of
  // the (huge) shape's size first.
  req = Scale();
  req.clear_raw_input_contents();
  req.mutable_inputs(0)->clear_shape();
  req.mutable_inputs(0)->add_shape(int64_t{1} << 40);
  req.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "contents has 1 values");
  req.mutable_inputs(0)->set_datatype("INT8");
  req.mutable_inputs(0)->clear_shape();
  req.mutable_inputs(0)->add_shape(1);
  req.mutable_inputs(0)->mutable_contents()->Clear();
  req.mutable_inputs(0)->mutable_contents()->add_int_contents(300);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "does not fit");
  req.mutable_inputs(0)->mutable_contents()->Clear();
  req.mutable_inputs(0)->mutable_contents()->add_fp64_contents(1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "INT8 takes int_contents");
}

TEST_P(KServeTest, RawContentsOfTheWrongSize) {
  ModelInferRequest req = Scale(4);
  req.set_raw_input_contents(0, std::string(15, '\0'));
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "raw_input_contents[0] has 15 bytes");
  req.set_raw_input_contents(0, std::string(17, '\0'));
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "needs 16");
  req = Scale(4);
  req.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "one way or the other");
}

TEST_P(KServeTest, HundredKilobyteNames) {
  const std::string big(100000, 'n');
  ModelInferRequest req = Scale();
  req.set_model_name(big);
  EXPECT_KSERVE(k_->Infer(req), NOT_FOUND, "unknown model 'nnnn");
  req = Scale();
  req.mutable_inputs(0)->set_name(big);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "unknown input 'nnnn");
  req = Scale();
  (*req.mutable_parameters())[big].set_double_param(1);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "unknown attr 'nnnn");
  req = Scale();
  req.add_outputs()->set_name(big);
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "unknown output 'nnnn");
  req = Scale();
  (*req.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param(big);
  (*req.mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  req.clear_raw_input_contents();
  EXPECT_KSERVE(k_->Infer(req), NOT_FOUND, "no shared-memory region 'nnnn");
  inference::SystemSharedMemoryRegisterRequest reg;
  reg.set_name(big);
  reg.set_key("/kserve-test-none");
  reg.set_byte_size(16);
  inference::SystemSharedMemoryRegisterResponse reg_resp;
  EXPECT_KSERVE(k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryRegister, reg, &reg_resp),
                INVALID_ARGUMENT, "100000 bytes; at most 256");
  inference::ModelMetadataRequest md;
  md.set_name(big);
  inference::ModelMetadataResponse md_resp;
  EXPECT_KSERVE(k_->Call(&GRPCInferenceService::Stub::ModelMetadata, md, &md_resp), NOT_FOUND,
                "unknown model");
  // As many inputs as a message holds: refused at the first one too many.
  req = Scale();
  for (int i = 0; i < 20000; ++i) Input(&req, "i" + std::to_string(i), "FP32", {1});
  EXPECT_KSERVE(k_->Infer(req), INVALID_ARGUMENT, "unknown input 'i0'");
}

TEST_P(KServeTest, MalformedMessagesAndUnimplemented) {
  for (const char* method : {"ModelInfer", "ModelMetadata", "SystemSharedMemoryRegister"})
    EXPECT_KSERVE(k_->Raw(method, std::string("\xff\xff\xff\xff\xff", 5)), INVALID_ARGUMENT,
                  "is not a valid inference.");
  inference::LogSettingsResponse log;
  EXPECT_KSERVE(
      k_->Call(&GRPCInferenceService::Stub::LogSettings, inference::LogSettingsRequest(), &log),
      UNIMPLEMENTED, "--log_level");
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("scale");
  inference::RepositoryModelUnloadResponse unloaded;
  EXPECT_KSERVE(k_->Call(&GRPCInferenceService::Stub::RepositoryModelUnload, unload, &unloaded),
                FAILED_PRECONDITION, "always loaded");
}

// A POSIX shm object every user may open (an anonymous TCP caller may
// register only such objects: docs/security.md), removed at the end.
class ShmObject {
 public:
  ShmObject(const std::string& name, size_t size) : name_(name) {
    shm_unlink(name.c_str());
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0666);
    EXPECT_GE(fd, 0);
    fchmod(fd, 0666);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    data_ = static_cast<float*>(p);
    size_ = size;
  }
  ~ShmObject() {
    munmap(data_, size_);
    shm_unlink(name_.c_str());
  }
  float* data() { return data_; }

 private:
  std::string name_;
  float* data_ = nullptr;
  size_t size_ = 0;
};

TEST_P(KServeTest, SharedMemoryBoundsAndLifetime) {
  const std::string key = "/kserve-test-" + std::to_string(getpid()) + "-" + GetParam();
  ShmObject obj(key, 64);
  for (int i = 0; i < 16; ++i) obj.data()[i] = static_cast<float>(i);
  inference::SystemSharedMemoryRegisterRequest reg;
  reg.set_name("r");
  reg.set_key(key);
  reg.set_byte_size(64);
  inference::SystemSharedMemoryRegisterResponse ok;
  ASSERT_TRUE(k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryRegister, reg, &ok).ok());
  EXPECT_KSERVE(k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryRegister, reg, &ok),
                ALREADY_EXISTS, "'r' is already registered");
  reg.set_name("too_big");
  reg.set_byte_size(1 << 20);
  EXPECT_KSERVE(k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryRegister, reg, &ok),
                INVALID_ARGUMENT, "too_big");

  auto shm_input = [](uint64_t offset, uint64_t size) {
    ModelInferRequest req = Scale(4);
    req.clear_raw_input_contents();
    auto& p = *req.mutable_inputs(0)->mutable_parameters();
    p["shared_memory_region"].set_string_param("r");
    p["shared_memory_byte_size"].set_uint64_param(size);
    p["shared_memory_offset"].set_uint64_param(offset);
    return req;
  };
  ModelInferResponse resp;
  ASSERT_TRUE(k_->Infer(shm_input(16, 16), &resp).ok());
  float y[4];
  std::memcpy(y, resp.raw_output_contents(0).data(), sizeof y);
  EXPECT_EQ(y[0], 8.0f);  // element 4, doubled
  EXPECT_KSERVE(k_->Infer(shm_input(std::numeric_limits<uint64_t>::max() - 8, 16)),
                INVALID_ARGUMENT, "past the end of region 'r'");
  EXPECT_KSERVE(k_->Infer(shm_input(56, 16)), INVALID_ARGUMENT, "past the end");
  EXPECT_KSERVE(k_->Infer(shm_input(0, 12)), INVALID_ARGUMENT, "needs 16");
  // The output in the region: at its end it does not fit; a byte size
  // smaller than the output is refused.
  ModelInferRequest out = Scale(4);
  auto* o = out.add_outputs();
  o->set_name("y");
  (*o->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  (*o->mutable_parameters())["shared_memory_offset"].set_int64_param(48);
  ASSERT_TRUE(k_->Infer(out, &resp).ok());
  EXPECT_EQ(obj.data()[12], 2.0f);
  EXPECT_EQ(resp.raw_output_contents_size(), 1);  // an empty entry keeps the indices
  EXPECT_TRUE(resp.raw_output_contents(0).empty());
  (*o->mutable_parameters())["shared_memory_offset"].set_int64_param(52);
  EXPECT_KSERVE(k_->Infer(out), INVALID_ARGUMENT, "");
  (*o->mutable_parameters())["shared_memory_offset"].set_int64_param(0);
  (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  EXPECT_KSERVE(k_->Infer(out), INVALID_ARGUMENT, "its shared_memory_byte_size is 8");

  inference::SystemSharedMemoryUnregisterRequest unreg;
  unreg.set_name("r");
  inference::SystemSharedMemoryUnregisterResponse unreg_resp;
  ASSERT_TRUE(
      k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryUnregister, unreg, &unreg_resp).ok());
  EXPECT_KSERVE(k_->Infer(shm_input(0, 16)), NOT_FOUND, "no shared-memory region 'r'");
  inference::SystemSharedMemoryStatusRequest status;
  status.set_name("r");
  inference::SystemSharedMemoryStatusResponse status_resp;
  EXPECT_KSERVE(
      k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryStatus, status, &status_resp),
      NOT_FOUND, "'r'");
  // Another connection is another principal: it does not see this one's regions.
  reg.set_name("mine");
  reg.set_byte_size(64);
  ASSERT_TRUE(k_->Call(&GRPCInferenceService::Stub::SystemSharedMemoryRegister, reg, &ok).ok());
  grpc::ChannelArguments args;
  args.SetInt("kerneld-test-other-connection", 1);  // no channel sharing: a second connection
  auto other = GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(d_->target(), grpc::InsecureChannelCredentials(), args));
  inference::SystemSharedMemoryStatusResponse theirs;
  grpc::ClientContext ctx;
  ASSERT_TRUE(
      other->SystemSharedMemoryStatus(&ctx, inference::SystemSharedMemoryStatusRequest(), &theirs)
          .ok());
  EXPECT_TRUE(theirs.regions().empty());
}

TEST_P(KServeTest, CudaSharedMemoryRefusals) {
  inference::CudaSharedMemoryRegisterRequest reg;
  reg.set_name("g");
  reg.set_raw_handle(std::string(63, '\0'));
  reg.set_byte_size(1024);
  inference::CudaSharedMemoryRegisterResponse resp;
  const grpc::Status st =
      k_->Call(&GRPCInferenceService::Stub::CudaSharedMemoryRegister, reg, &resp);
  // Without a GPU: FAILED_PRECONDITION before the handle is looked at;
  // with one, the 63-byte handle is refused.
  if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
    EXPECT_NE(st.error_message().find("needs a GPU"), std::string::npos) << st.error_message();
  else
    EXPECT_KSERVE(st, INVALID_ARGUMENT, "raw_handle has 63 bytes");
}

// A raw ModelStreamInfer client: writes the messages (bytes as they are),
// half-closes, and collects every answer and the final status.
class RawStream : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawStream(grpc::GenericStub* stub, const std::vector<std::string>& messages) {
    for (const auto& m : messages) {
      grpc::Slice s(m);
      out_.emplace_back(&s, 1);
    }
    stub->PrepareBidiStreamingCall(&ctx_, "/inference.GRPCInferenceService/ModelStreamInfer",
                                   grpc::StubOptions(), this);
    StartRead(&in_);
    WriteNext();
    StartCall();
  }
  grpc::Status Await(std::vector<inference::ModelStreamInferResponse>* answers) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    *answers = answers_;
    return status_;
  }

 private:
  void WriteNext() {
    if (next_ < out_.size())
      StartWrite(&out_[next_++]);
    else
      StartWritesDone();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    inference::ModelStreamInferResponse r;
    EXPECT_TRUE(
        grpc::SerializationTraits<inference::ModelStreamInferResponse>::Deserialize(&in_, &r).ok());
    {
      std::lock_guard<std::mutex> lock(mu_);
      answers_.push_back(r);
    }
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_all();
  }
  grpc::ClientContext ctx_;
  std::vector<grpc::ByteBuffer> out_;
  size_t next_ = 0;
  grpc::ByteBuffer in_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<inference::ModelStreamInferResponse> answers_;
  grpc::Status status_;
  bool done_ = false;
};

TEST_P(KServeTest, StreamAnswersInBandAndEndsOnGarbage) {
  grpc::GenericStub stub(k_->channel());
  ModelInferRequest good = Scale(4), bad = Scale(4), unknown = Scale(4);
  good.set_id("good");
  bad.set_id("bad");
  bad.set_raw_input_contents(0, "xyz");
  unknown.set_id("unknown");
  unknown.set_model_name(std::string(100000, 'm'));
  {
    RawStream s(&stub, {good.SerializeAsString(), bad.SerializeAsString(),
                        unknown.SerializeAsString(), good.SerializeAsString()});
    std::vector<inference::ModelStreamInferResponse> answers;
    ASSERT_TRUE(s.Await(&answers).ok());
    ASSERT_EQ(answers.size(), 4u);
    int ok = 0;
    for (const auto& a : answers) {
      EXPECT_LE(a.ByteSizeLong(), 100000u);  // the 100 kB name is not echoed back
      if (a.error_message().empty()) {
        ++ok;
        EXPECT_EQ(a.infer_response().id(), "good");
        EXPECT_EQ(a.infer_response().raw_output_contents(0).size(), 16u);
      } else if (a.infer_response().id() == "bad") {
        EXPECT_EQ(
            a.error_message().rfind("INVALID_ARGUMENT: scale: input 'x': raw_input_contents", 0),
            0u)
            << a.error_message();
      } else {
        EXPECT_EQ(a.infer_response().id(), "unknown");
        EXPECT_EQ(a.error_message().rfind("NOT_FOUND: unknown model 'mmm", 0), 0u)
            << a.error_message().substr(0, 200);
      }
    }
    EXPECT_EQ(ok, 2);
  }
  {
    RawStream s(&stub, {good.SerializeAsString(), std::string("\xff\xff\xff", 3)});
    std::vector<inference::ModelStreamInferResponse> answers;
    const grpc::Status st = s.Await(&answers);
    EXPECT_KSERVE(st, INVALID_ARGUMENT, "ModelStreamInfer message 2 is not a valid");
    ASSERT_EQ(answers.size(), 1u);  // what came before is answered
    EXPECT_TRUE(answers[0].error_message().empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Apis, KServeTest, ::testing::Values("callback", "sync"));

}  // namespace
}  // namespace kerneld::testing
