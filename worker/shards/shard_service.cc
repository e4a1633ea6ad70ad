#include "worker/shards/shard_service.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/rpc/grpc_status.h"

namespace mapd {

namespace {

// One file being received: its bytes so far, written to a file in the staging directory.
struct Incoming {
  std::ofstream out;
  int64_t bytes = 0;
  bool whole = false;
};

// Takes one chunk of a put: checks it against the first and the file's bytes so far, writes it.
absl::Status TakeChunk(const v1::ShardChunk& first, const v1::ShardChunk& c, const std::string& staging,
                       std::map<std::string, Incoming>& files) {
  if (c.job_id() != first.job_id() || c.step() != first.step() || c.secret() != first.secret()) {
    return absl::InvalidArgumentError("every chunk of a PutShards call names the same job, step and secret");
  }
  if (auto st = CheckShardFileName(c.file()); !st.ok()) return st;
  if (static_cast<int64_t>(c.data().size()) > kMaxShardChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a chunk of ", c.file(), " holds ", c.data().size(), " bytes; at most ", kMaxShardChunkBytes));
  }
  auto it = files.find(c.file());
  if (it == files.end()) {
    if (static_cast<int>(files.size()) >= kMaxShardFilesPerPut) {
      return absl::InvalidArgumentError(absl::StrCat("a PutShards call carries at most ", kMaxShardFilesPerPut, " files"));
    }
    it = files.try_emplace(c.file()).first;
    it->second.out.open(staging + "/" + c.file(), std::ios::binary | std::ios::trunc);
  }
  Incoming& f = it->second;
  if (f.whole || c.offset() != f.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(c.file(), ": a chunk at offset ", c.offset(), " after ", f.bytes, " bytes",
                                                   f.whole ? " and its last chunk" : "", "; chunks come in order, once"));
  }
  f.out.write(c.data().data(), static_cast<std::streamsize>(c.data().size()));
  if (!f.out) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", c.file(), " under ", staging, " (disk full?)"));
  f.bytes += static_cast<int64_t>(c.data().size());
  if (c.last()) {
    f.out.close();
    if (!f.out) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", c.file(), " under ", staging, " (disk full?)"));
    f.whole = true;
    return SyncFile(staging + "/" + c.file());  // the peer counts it kept once the call returns
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileChunks(const std::string& path, v1::ShardChunk c, const std::function<bool(const v1::ShardChunk&)>& write) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", c.file(), " (", path, ")"));
  std::string buffer(static_cast<size_t>(kMaxShardChunkBytes), '\0');
  int64_t offset = 0;
  do {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    c.set_offset(offset);
    c.set_data(buffer.data(), static_cast<size_t>(n));
    c.set_last(in.eof());
    offset += n;
    if (!write(c)) return absl::CancelledError(absl::StrCat("sending ", c.file(), ": the stream ended"));
  } while (!c.last());
  return absl::OkStatus();
}

grpc::Status ShardServiceImpl::PutShards(grpc::ServerContext*, grpc::ServerReader<v1::ShardChunk>* reader, v1::PutShardsResponse* out) {
  v1::ShardChunk first;
  if (!reader->Read(&first)) return ToGrpcStatus(absl::InvalidArgumentError("a PutShards call without a chunk"));
  if (auto st = store_->CheckAccess(first.job_id(), first.secret()); !st.ok()) return ToGrpcStatus(st);
  if (first.step() <= 0) return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("step ", first.step(), ": a committed step is >= 1")));
  auto staging = store_->NewStaging(first.job_id(), first.step());
  if (!staging.ok()) return ToGrpcStatus(staging.status());
  std::map<std::string, Incoming> files;
  absl::Status st = TakeChunk(first, first, *staging, files);
  v1::ShardChunk chunk;
  while (st.ok() && reader->Read(&chunk)) st = TakeChunk(first, chunk, *staging, files);
  std::vector<std::string> names;
  for (auto& [name, f] : files) {
    if (st.ok() && !f.whole) st = absl::InvalidArgumentError(absl::StrCat(name, ": the call ended before its last chunk"));
    names.push_back(name);
  }
  if (st.ok()) st = store_->Keep(first.job_id(), first.step(), *staging, names);
  if (!st.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(*staging, ec);
    return ToGrpcStatus(st);
  }
  for (const std::string& name : names) out->add_files(name);
  return grpc::Status::OK;
}

grpc::Status ShardServiceImpl::GetShards(grpc::ServerContext* context, const v1::GetShardsRequest* request,
                                         grpc::ServerWriter<v1::ShardChunk>* writer) {
  if (auto st = store_->CheckAccess(request->job_id(), request->secret()); !st.ok()) return ToGrpcStatus(st);
  if (request->files_size() > kMaxShardFilesPerPut) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("a GetShards call asks for at most ", kMaxShardFilesPerPut, " files")));
  }
  std::vector<std::string> paths;  // every one found before the first byte goes out
  for (const std::string& file : request->files()) {
    auto path = store_->PathOf(request->job_id(), request->step(), file);
    if (!path.ok()) return ToGrpcStatus(path.status());
    paths.push_back(*path);
  }
  for (int i = 0; i < request->files_size(); ++i) {
    v1::ShardChunk header;
    header.set_job_id(request->job_id());
    header.set_step(request->step());
    header.set_file(request->files(i));
    const absl::Status st =
        WriteFileChunks(paths[i], header, [&](const v1::ShardChunk& c) { return !context->IsCancelled() && writer->Write(c); });
    if (!st.ok()) return ToGrpcStatus(st);
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<ShardServer>> StartShardServer(const std::string& listen, ShardStore* store) {
  auto s = std::make_unique<ShardServer>();
  s->service = std::make_unique<ShardServiceImpl>(store);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // the port is this worker's alone
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxShardChunkBytes) + 4096);
  // Calls at once are bounded (a call past it: RESOURCE_EXHAUSTED, which the pusher retries on its
  // next commit and a fetch tries the next holder on): a peer that opens puts and never ends them
  // cannot take the worker's threads.
  grpc::ResourceQuota quota("mapd-worker-shards");
  quota.SetMaxThreads(kMaxShardServerThreads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(s->service.get());
  s->server = builder.BuildAndStart();
  if (s->server == nullptr || port == 0) {
    return absl::AlreadyExistsError(absl::StrCat("cannot serve checkpoint shards on ", listen,
                                                 ": the port is taken or the address is not this host's; give another --shard-listen"));
  }
  s->address = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  return s;
}

}  // namespace mapd
