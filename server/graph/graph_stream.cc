#include "graph/graph_stream.h"

#include <string>
#include <utility>

#include "graph/graph_runner.h"

namespace kerneld::server {

namespace {

// The message's id: its own, else the graph's (ExecuteGraphRequest.request_id).
const std::string& MessageId(const v1::ExecuteRequest& req) {
  return req.request_id().empty() ? req.graph().request_id() : req.request_id();
}

// The top level of a graph message's answer: its id and status, as a plain
// call's answer carries them.
void SetTopLevel(const std::string& id, const Status& st, v1::ExecuteResponse* resp) {
  resp->set_request_id(id);
  v1::Status* s = resp->mutable_status();
  s->set_code(static_cast<int>(st.code()));
  if (st.ok())
    s->clear_message();
  else
    s->set_message(st.message());
}

// Answers a graph message the runner never saw, in both places.
void Refuse(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, const Status& st,
            const std::function<void(const Status&)>& done) {
  v1::ExecuteGraphResponse* g = resp->mutable_graph();
  g->set_request_id(req.graph().request_id());
  g->mutable_status()->set_code(static_cast<int>(st.code()));
  g->mutable_status()->set_message(st.message());
  SetTopLevel(MessageId(req), st, resp);
  done(st);
}

}  // namespace

void StartGraphMessage(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
                       std::function<void(const Status&)> done) {
  GraphRunner* graphs = CurrentGraphRunner();
  if (graphs == nullptr)
    return Refuse(req, resp, Status(StatusCode::kUnimplemented, "this server runs no graphs"),
                  done);
  // One message is one thing: a call's fields beside a graph would be
  // ignored silently otherwise.
  if (!req.op().empty() || req.inputs_size() > 0 || req.outputs_size() > 0 ||
      req.attrs_size() > 0 || !req.backend().empty() || !req.device().empty())
    return Refuse(req, resp,
                  InvalidArgument("a graph message (ExecuteRequest.graph) leaves op, inputs, "
                                  "outputs, attrs, backend and device empty: the graph carries "
                                  "its own (its device: ExecuteGraphRequest.device)"),
                  done);
  // The id refers into `req`, which outlives `done`.
  graphs->Start(req.graph(), resp->mutable_graph(), std::move(ctl),
                [resp, &id = MessageId(req), done = std::move(done)](const Status& st) {
                  SetTopLevel(id, st, resp);
                  done(st);
                });
}

}  // namespace kerneld::server
