#include "worker/shards/shard_client.h"

#include <chrono>
#include <memory>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/rpc/grpc_status.h"
#include "proto/mapd/v1/shard_service.grpc.pb.h"
#include "worker/shards/shard_service.h"

namespace mapd {

namespace {

std::unique_ptr<v1::ShardService::Stub> StubFor(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kMaxShardChunkBytes) + 4096);
  return v1::ShardService::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext& context, double timeout_seconds) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
}

// One holder's files, each written whole to `into` as its last chunk arrives.
absl::Status FetchFrom(const std::string& address, const ShardKey& key, const std::vector<std::string>& files, const std::string& into,
                       double timeout_seconds) {
  v1::GetShardsRequest request;
  request.set_job_id(key.job_id);
  request.set_step(key.step);
  request.set_secret(key.secret);
  for (const std::string& f : files) request.add_files(f);
  grpc::ClientContext context;
  SetDeadline(context, timeout_seconds);
  auto stub = StubFor(address);
  auto reader = stub->GetShards(&context, request);
  v1::ShardChunk c;
  std::string file, bytes;
  size_t next = 0;
  while (reader->Read(&c)) {
    // The files come in the order asked, each in order.
    if (next >= files.size() || c.file() != files[next] || c.offset() != static_cast<int64_t>(bytes.size())) {
      context.TryCancel();
      return absl::DataLossError(absl::StrCat("shard service ", address, " sent ", c.file(), " at offset ", c.offset(), " out of order"));
    }
    bytes.append(c.data());
    if (c.last()) {
      if (auto st = WriteStringToFileAtomic(absl::StrCat(into, "/", files[next]), bytes); !st.ok()) {
        context.TryCancel();
        return st;
      }
      bytes.clear();
      ++next;
    }
  }
  const absl::Status st = FromGrpcStatus(reader->Finish());
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("shard service ", address, ": ", st.message()));
  if (next != files.size()) return absl::DataLossError(absl::StrCat("shard service ", address, " ended after ", next, " of ", files.size(), " files"));
  return absl::OkStatus();
}

}  // namespace

void PushCancel::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool PushCancel::Track(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  context_ = context;
  return !cancelled_;
}

absl::Status PushShards(const std::string& address, const ShardKey& key, const std::string& dir, const std::vector<std::string>& files,
                        double timeout_seconds, PushCancel* cancel) {
  grpc::ClientContext context;
  SetDeadline(context, timeout_seconds);
  if (cancel != nullptr && !cancel->Track(&context)) return absl::CancelledError("the push was cancelled");
  struct Untrack {
    PushCancel* cancel;
    ~Untrack() {
      if (cancel != nullptr) cancel->Track(nullptr);
    }
  } untrack{cancel};
  v1::PutShardsResponse response;
  auto stub = StubFor(address);
  auto writer = stub->PutShards(&context, &response);
  absl::Status error;
  for (const std::string& file : files) {
    v1::ShardChunk header;
    header.set_job_id(key.job_id);
    header.set_step(key.step);
    header.set_secret(key.secret);
    header.set_file(file);
    error = WriteFileChunks(dir + "/" + file, header, [&](const v1::ShardChunk& c) { return writer->Write(c); });
    if (!error.ok()) break;
  }
  if (!error.ok() && error.code() != absl::StatusCode::kCancelled) context.TryCancel();  // (cancelled: the call's status says why)
  writer->WritesDone();
  const absl::Status st = FromGrpcStatus(writer->Finish());
  if (!error.ok() && error.code() != absl::StatusCode::kCancelled) return error;
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("shard service ", address, ": ", st.message()));
  if (response.files_size() != static_cast<int>(files.size())) {
    return absl::DataLossError(absl::StrCat("shard service ", address, " kept ", response.files_size(), " of ", files.size(), " files"));
  }
  return absl::OkStatus();
}

absl::Status FetchShards(const std::vector<std::string>& addresses, const ShardKey& key, const std::vector<std::string>& files,
                         const std::string& into, double timeout_seconds) {
  absl::Status last = absl::NotFoundError(absl::StrCat("job ", key.job_id, ": no worker is known to keep step ", key.step, "'s ",
                                                       files.empty() ? std::string("files") : files.back()));
  for (const std::string& address : addresses) {
    last = FetchFrom(address, key, files, into, timeout_seconds);
    if (last.ok()) return last;
  }
  return last;
}

}  // namespace mapd
