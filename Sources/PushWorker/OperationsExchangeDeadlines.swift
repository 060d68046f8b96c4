import NIOCore

/// What `OperationsHandler` tells `ExchangeDeadlines` about each answer (an outbound user event, travelling towards the
/// socket).
enum ExchangeProgress {
    /// A request head arrived and its answer is being written.
    case answerStarted
    /// The oldest answer in progress is written (handed to the kernel) or failed.
    case answerFinished
}

/// The deadlines of one operations connection, which bound how long any client holds a place:
/// - request head: a client that has not completed a request head within `headTimeout` — counted from the accept for
///   the first request, from the first byte of each later one — is closed, however often it sends a byte (the idle
///   timeout alone is defeated by a client that sends one byte now and then). No request has a body (one that announces
///   a body is refused at its head), so a complete head is a complete request. Between requests the idle timeout applies.
/// - answer write: an answer not fully written `writeTimeout` after it started — its client does not read, or reads too
///   slowly — resets the connection, so the kernel also drops what it still holds for that client.
///
/// It sits before the HTTP codec, so it sees every byte that arrives, and learns of answers from `ExchangeProgress`
/// events. It also tells `ConnectionSlots` when the connection is between requests.
final class ExchangeDeadlines: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = NIOAny

    private let headTimeout: TimeAmount
    private let writeTimeout: TimeAmount
    private let slots: ConnectionSlots
    private var headDeadline: Scheduled<Void>?
    /// One per answer in progress, oldest first: pipelined requests are answered in order, and a next head can arrive
    /// (from the pipelining buffer) before the answer to the previous one is written.
    private var writeDeadlines: [Scheduled<Void>] = []
    private var betweenRequests = false

    init(headTimeout: TimeAmount, writeTimeout: TimeAmount, slots: ConnectionSlots) {
        self.headTimeout = headTimeout
        self.writeTimeout = writeTimeout
        self.slots = slots
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startHeadDeadline(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startHeadDeadline(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if betweenRequests {
            betweenRequests = false
            slots.setBetweenRequests(false, context.channel)
            startHeadDeadline(context: context)
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        switch event as? ExchangeProgress {
        case .answerStarted?:
            headDeadline?.cancel()
            headDeadline = nil
            if betweenRequests {
                betweenRequests = false
                slots.setBetweenRequests(false, context.channel)
            }
            let channel = context.channel
            writeDeadlines.append(context.eventLoop.scheduleTask(in: writeTimeout) { channel.closeWithReset() })
            promise?.succeed()
        case .answerFinished?:
            if !writeDeadlines.isEmpty { writeDeadlines.removeFirst().cancel() }
            if writeDeadlines.isEmpty && headDeadline == nil {
                betweenRequests = true
                slots.setBetweenRequests(true, context.channel)
            }
            promise?.succeed()
        case nil:
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelDeadlines()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { cancelDeadlines() }

    private func startHeadDeadline(context: ChannelHandlerContext) {
        guard headDeadline == nil, writeDeadlines.isEmpty else { return }
        let channel = context.channel
        headDeadline = context.eventLoop.scheduleTask(in: headTimeout) { channel.close(promise: nil) }
    }

    private func cancelDeadlines() {
        headDeadline?.cancel()
        headDeadline = nil
        for deadline in writeDeadlines { deadline.cancel() }
        writeDeadlines.removeAll()
    }
}

extension Channel {
    /// Closes with a reset (`SO_LINGER` 0): the kernel drops the bytes it still holds for a client that does not read,
    /// rather than keep them, and the socket, until they are acknowledged.
    func closeWithReset() {
        guard let options = self as? SocketOptionProvider else { return close(promise: nil) }
        options.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0)).whenComplete { _ in self.close(promise: nil) }
    }
}
