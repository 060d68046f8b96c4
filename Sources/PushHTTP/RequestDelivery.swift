import PushCore

/// A provider whose delivery is one request it builds without waiting: build (`prepare`) → send → classify
/// (`classify`, then `read`). This is the hot-path port: `start` sends with no task waiting, and `deliver`, the
/// awaited form, is made of the same three steps here, in one place.
public protocol RequestDelivery: PushProvider {
    /// What reading the answer needs besides the delivery (the request's credentials, how it was built).
    associatedtype Sending: Sendable

    var transport: any HTTPTransport { get }

    /// The delivery's request and what reading its answer needs, or the result of not sending it; nil when this
    /// delivery awaits something first (its `deliver` then does that itself).
    func prepare(_ delivery: Delivery) -> Prepared<PreparedRequest<Sending>>?

    /// The provider's answer, classified by its rules.
    static func classify(_ response: HTTPResponse, of sending: Sending, for delivery: Delivery) -> DeliveryResult

    /// What the plugin makes of a classified answer, the transport's failures included (default: it as it is).
    static func read(_ result: DeliveryResult, of sending: Sending, for delivery: Delivery) -> DeliveryResult
}

/// A request ready to go, and what reading its answer needs.
public struct PreparedRequest<Sending: Sendable>: Sendable {
    public var request: HTTPRequest
    public var sending: Sending

    public init(_ request: HTTPRequest, _ sending: Sending) {
        self.request = request
        self.sending = sending
    }
}

extension RequestDelivery {
    public static func read(_ result: DeliveryResult, of sending: Sending, for delivery: Delivery) -> DeliveryResult { result }

    public func deliver(_ delivery: Delivery) async -> DeliveryResult { await deliverRequest(delivery) }

    /// `deliver` of a delivery whose request is built without waiting; a plugin whose own `deliver` awaits something
    /// first (`prepare` returned nil) comes here once it has.
    public func deliverRequest(_ delivery: Delivery) async -> DeliveryResult {
        switch prepare(delivery) {
        case .ready(let prepared)?: return await Self.exchange(prepared, for: delivery, over: transport)
        case .refused(let result)?: return result
        case nil: return .failed(reason: "\(id.rawValue) could not build a request for this delivery", httpStatus: nil)
        }
    }

    /// Sends a prepared request, with a task waiting, and reads the answer.
    public static func exchange(
        _ prepared: PreparedRequest<Sending>, for delivery: Delivery, over transport: any HTTPTransport
    ) async -> DeliveryResult {
        let answer: Result<HTTPResponse, HTTPTransportError>
        do throws(HTTPTransportError) {
            answer = .success(try await transport.send(HTTPDelivery.atLane(prepared.request, delivery.lane)))
        } catch {
            answer = .failure(error)
        }
        return result(of: answer, sending: prepared.sending, for: delivery)
    }

    public func start(_ delivery: Delivery, completion: @escaping DeliveryCompletion) -> DeliveryStart {
        switch prepare(delivery) {
        case .ready(let prepared)?:
            let sending = prepared.sending
            return .sent(
                transport.start(HTTPDelivery.atLane(prepared.request, delivery.lane)) { answer in
                    completion(Self.result(of: answer, sending: sending, for: delivery))
                })
        case .refused(let result)?: return .finished(result)
        case nil: return .needsTask
        }
    }

    @inline(never)
    static func result(of answer: Result<HTTPResponse, HTTPTransportError>, sending: Sending, for delivery: Delivery) -> DeliveryResult {
        switch answer {
        case .success(let response): read(classify(response, of: sending, for: delivery), of: sending, for: delivery)
        case .failure(let error): read(HTTPDelivery.result(of: error), of: sending, for: delivery)
        }
    }
}
