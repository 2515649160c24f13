package io.jumpgate.trino;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.trino.spi.HostAddress;
import io.trino.spi.connector.ConnectorSplit;

import java.util.List;
import java.util.Map;

/**
 * One destination of a Jumpgate job: the job's {@code key} (one per table scan of a query),
 * which of its {@code destinations} this is, and the files of the data root that feed it (for a
 * pushed aggregation, one destination reads them all). The first split of a scan that a node
 * reads starts the job with all its destinations in that node's receiver service, so every split
 * of one scan runs on one worker, {@code node} ("host:port", the split manager's choice; none:
 * anywhere). {@code dynamicFilters} are the conditions Trino's dynamic filters gave the scan
 * before its job started (base column name → contract condition; {@link DynamicFilterSplitSource}).
 */
public record JumpgateSplit(
        @JsonProperty("key") String key,
        @JsonProperty("index") int index,
        @JsonProperty("destinations") int destinations,
        @JsonProperty("groups") List<List<String>> groups,
        @JsonProperty("dynamicFilters") Map<String, String> dynamicFilters,
        @JsonProperty("node") String node) implements ConnectorSplit {

    @JsonCreator
    public JumpgateSplit {
        groups = groups.stream().map(List::copyOf).toList();
        dynamicFilters = dynamicFilters == null ? Map.of() : Map.copyOf(dynamicFilters);
    }

    @Override
    public boolean isRemotelyAccessible() {
        return node == null;
    }

    @Override
    public List<HostAddress> getAddresses() {
        return node == null ? List.of() : List.of(HostAddress.fromString(node));
    }

    @Override
    public Map<String, String> getSplitInfo() {
        return Map.of("key", key, "destination", Integer.toString(index), "of", Integer.toString(destinations),
                "node", node == null ? "any" : node);
    }

    @Override
    public long getRetainedSizeInBytes() {
        return 256L + dynamicFilters.values().stream().mapToLong(v -> 80L + v.length()).sum() + groups.stream().mapToLong(g -> g.stream().mapToLong(s -> 40L + s.length()).sum()).sum();
    }
}
