#include "tools/fabricsim/kubelet.h"

#include <unistd.h>

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "kubelet/podresources/v1/api.grpc.pb.h"

namespace fabricscope {

class FakeKubelet::Service final : public v1::PodResourcesLister::Service {
 public:
  explicit Service(std::atomic<int>* lists) : lists_(lists) {}

  grpc::Status List(grpc::ServerContext* ctx, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    absl::Duration delay;
    {
      std::lock_guard lock(mu_);
      delay = delay_;
      *out = table_;
    }
    const absl::Time until = absl::Now() + delay;
    while (absl::Now() < until && !ctx->IsCancelled()) absl::SleepFor(absl::Milliseconds(10));
    lists_->fetch_add(1);
    return grpc::Status::OK;
  }

  grpc::Status GetAllocatableResources(grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse*) override {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not faked");
  }

  void Set(v1::ListPodResourcesResponse table) {
    std::lock_guard lock(mu_);
    table_ = std::move(table);
  }
  void SetDelay(absl::Duration d) {
    std::lock_guard lock(mu_);
    delay_ = d;
  }

 private:
  std::atomic<int>* const lists_;
  std::mutex mu_;
  v1::ListPodResourcesResponse table_;
  absl::Duration delay_;
};

struct FakeKubelet::Server {
  std::unique_ptr<grpc::Server> server;
};

FakeKubelet::FakeKubelet() : service_(std::make_unique<Service>(&lists_)) {}

FakeKubelet::~FakeKubelet() { Stop(); }

absl::Status FakeKubelet::Start(const std::string& socket_path) {
  Stop();
  ::unlink(socket_path.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  auto server = std::make_unique<Server>();
  server->server = builder.BuildAndStart();
  if (server->server == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve on ", socket_path));
  }
  server_ = std::move(server);
  socket_path_ = socket_path;
  return absl::OkStatus();
}

void FakeKubelet::Stop() {
  if (server_ == nullptr) return;
  server_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->server->Wait();
  server_.reset();
  ::unlink(socket_path_.c_str());
}

absl::Status FakeKubelet::SetFromText(absl::string_view text) {
  v1::ListPodResourcesResponse table;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++n;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.empty()) continue;
    if (f.size() != 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", n, ": want NAMESPACE POD CONTAINER RESOURCE IDS"));
    }
    v1::PodResources* pod = nullptr;
    for (v1::PodResources& p : *table.mutable_pod_resources()) {
      if (p.namespace_() == f[0] && p.name() == f[1]) pod = &p;
    }
    if (pod == nullptr) {
      pod = table.add_pod_resources();
      pod->set_namespace_(std::string(f[0]));
      pod->set_name(std::string(f[1]));
    }
    v1::ContainerResources* c = nullptr;
    for (v1::ContainerResources& x : *pod->mutable_containers()) {
      if (x.name() == f[2]) c = &x;
    }
    if (c == nullptr) {
      c = pod->add_containers();
      c->set_name(std::string(f[2]));
    }
    v1::ContainerDevices* d = c->add_devices();
    d->set_resource_name(std::string(f[3]));
    for (absl::string_view id : absl::StrSplit(f[4], ',', absl::SkipEmpty())) {
      d->add_device_ids(std::string(id));
    }
    d->mutable_topology()->add_nodes()->set_id(0);
  }
  service_->Set(std::move(table));
  return absl::OkStatus();
}

void FakeKubelet::SetDelay(absl::Duration delay) { service_->SetDelay(delay); }

}  // namespace fabricscope
