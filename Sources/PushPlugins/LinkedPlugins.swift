import APNsPlugin
import FCMPlugin
import HMSPlugin
import ProxyPlugin
import PushPluginAPI
import WebPushPlugin

/// The provider plugins this build links. A new provider is one more line here (and its target in Package.swift).
public enum LinkedPlugins {
    public static let all: [any ProviderPlugin] = [
        APNsPlugin(),
        FCMPlugin(),
        WebPushPlugin(),
        ProxyPlugin(),
        HMSPlugin(),
    ]
}
