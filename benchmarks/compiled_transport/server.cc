// A bare gRPC C++ server for benchmarks/grpc_transport_floor.py --compiled: the engine's two
// hot message shapes with no engine code, so the Python gRPC figures have a compiled baseline.
//
// FlowService.InvokeRPC answers an empty response (as the engine's unary RPCs, queries and
// ReadStream calls); WorkerTaskService.PollWorkerTask answers each request frame with one ping
// frame (as the engine answers a pull Worker). Prints "ready PORT" once it listens.
// Built by build.sh from the SDK's own dex.proto descriptor; see that script.
#include <cstdio>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "dex.grpc.pb.h"

namespace {

class Flows final : public dex::FlowService::Service {
  grpc::Status InvokeRPC(grpc::ServerContext*, const dex::InvokeRPCRequest*,
                         dex::InvokeRPCResponse*) override {
    return grpc::Status::OK;
  }
};

class Tasks final : public dex::WorkerTaskService::Service {
  grpc::Status PollWorkerTask(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<dex::PollWorkerTaskResponse, dex::PollWorkerTaskRequest>* stream)
      override {
    dex::PollWorkerTaskRequest request;
    dex::PollWorkerTaskResponse response;
    response.mutable_ping();
    while (stream->Read(&request)) {
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }
};

}  // namespace

int main() {
  Flows flows;
  Tasks tasks;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(256 * 1024 * 1024);
  builder.SetMaxSendMessageSize(256 * 1024 * 1024);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&flows);
  builder.RegisterService(&tasks);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "compiled_transport: cannot listen on 127.0.0.1\n");
    return 1;
  }
  std::printf("ready %d\n", port);
  std::fflush(stdout);
  server->Wait();
  return 0;
}
