import PushCore

/// The shared half of every HTTP provider plugin: send the request, turn transport
/// failures into retryable results, and let the plugin classify real answers.
public enum HTTPDelivery {
    /// Sends `delivery`'s request at the delivery's lane (urgent requests get streams first) and classifies the answer.
    public static func send(
        _ request: HTTPRequest, for delivery: Delivery, over transport: any HTTPTransport,
        classify: (HTTPResponse) -> DeliveryResult
    ) async -> DeliveryResult {
        var request = request
        request.lane = delivery.lane
        do {
            return classify(try await transport.send(request))
        } catch .invalidRequest(let detail) {
            return .failed(reason: "invalid request: \(detail)", httpStatus: nil)
        } catch {
            return .retryable(reason: error.description, httpStatus: nil)
        }
    }

    /// The response's `Retry-After`, if it has a valid one.
    public static func retryAfter(_ response: HTTPResponse) -> Duration? {
        RetryAfter.parse(response.header("retry-after"))
    }
}
