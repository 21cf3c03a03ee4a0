//go:build !linux

package plugin

import "google.golang.org/grpc/credentials"

// kernelAuthenticated is false outside Linux: the kernel's peer
// credentials are not read there, and go-plugin's AutoMTLS authenticates
// and encrypts the plugin connection (a TCP socket on Windows).
const kernelAuthenticated = false

func hostCreds(func() int) credentials.TransportCredentials { return nil }

func pluginCreds() credentials.TransportCredentials { return nil }
