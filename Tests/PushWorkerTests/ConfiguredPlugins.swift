import APNsPlugin
import FCMPlugin
import ProxyPlugin
import PushWorker
import WebPushPlugin

/// Each enabled plugin's typed configuration, as its plugin read it.
extension WorkerConfiguration {
    var apns: APNsConfiguration? { plugin(.apns)?.configuration(as: APNsConfiguration.self) }
    var fcm: FCMConfiguration? { plugin(.fcm)?.configuration(as: FCMConfiguration.self) }
    var webPush: WebPushConfiguration? { plugin(.webpush)?.configuration(as: WebPushConfiguration.self) }
    var proxy: ProxyConfiguration? { plugin(.proxy)?.configuration(as: ProxyConfiguration.self) }
}
