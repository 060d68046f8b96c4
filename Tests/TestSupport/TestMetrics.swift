import Metrics
import Prometheus

/// One Prometheus registry for the whole test process (swift-metrics is bootstrapped once).
public enum TestMetrics {
    public static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()

    /// The value of one sample line, e.g. `push_deliveries_total{provider="proxy",app="x",status="delivered"}`.
    public static func value(of series: String) -> Double? {
        for line in registry.emitToString().split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }
}
