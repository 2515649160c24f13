package io.jumpgate.core.client;

import java.util.Map;
import java.util.Optional;

import com.fasterxml.jackson.databind.JsonNode;

/** A compiled job (POST /v1/jobs): its id, its outputs by send name, and the whole answer. */
public record CompiledJob(String jobId, Map<String, OutputInfo> outputs, JsonNode answer) {
  public Optional<OutputInfo> output(String sendName) {
    return Optional.ofNullable(outputs.get(sendName));
  }

  /** Whether the job was started by the call that compiled it (POST /v1/jobs?execute=true). */
  public boolean started() {
    return !"compiled".equals(answer.path("state").asText("compiled"));
  }
}
