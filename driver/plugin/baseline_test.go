package plugin_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/anvilmetal/anvil/driver/plugin"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
)

// The bare gRPC baseline of BenchmarkPowerStateRead: the test binary,
// started with grpcSocketEnv naming a Unix socket path, serves a Driver
// service whose Invoke answers every call with the fixed response a power
// read gets, over plaintext or, when grpcClientCertEnv holds the client's
// certificate, over mutual TLS set up as go-plugin's AutoMTLS does. It
// prints one line (the server certificate, base64 DER, or "plain") once it
// listens and exits when its stdin closes.
const (
	grpcSocketEnv     = "ANVIL_PLUGIN_TEST_GRPC_SOCKET"
	grpcClientCertEnv = "ANVIL_PLUGIN_TEST_GRPC_CLIENT_CERT"
	// grpcTunedEnv makes the server use the plugin transport's options.
	grpcTunedEnv = "ANVIL_PLUGIN_TEST_GRPC_TUNED"
)

// bareServer answers Invoke with a fixed power-state result and nothing
// else: no task decoding, no dispatch, no JSON.
type bareServer struct {
	pb.UnimplementedDriverServer
}

var bareResponse = &pb.InvokeResponse{ResultJson: []byte(`"power on"`)}

func (bareServer) Invoke(context.Context, *pb.InvokeRequest) (*pb.InvokeResponse, error) {
	return bareResponse, nil
}

// Session answers each call at once, in the order received.
func (bareServer) Session(stream pb.Driver_SessionServer) error {
	for {
		call, err := stream.Recv()
		if err != nil {
			return nil
		}
		if err := stream.Send(&pb.SessionReply{Id: call.Id, Response: bareResponse}); err != nil {
			return nil
		}
	}
}

// serveBareGRPC is the server process's main.
func serveBareGRPC(path string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bare gRPC server:", err)
		return 1
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fail(err)
	}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20), grpc.MaxSendMsgSize(64 << 20)}
	if os.Getenv(grpcTunedEnv) != "" {
		opts = plugin.ServerOptions()
	}
	hello := "plain"
	if clientPEM := os.Getenv(grpcClientCertEnv); clientPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(clientPEM)) {
			return fail(fmt.Errorf("%s holds no certificate", grpcClientCertEnv))
		}
		cert, err := selfSignedCert()
		if err != nil {
			return fail(err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs: pool, RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "localhost",
		})))
		hello = base64.StdEncoding.EncodeToString(cert.Certificate[0])
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterDriverServer(srv, bareServer{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the benchmark closes stdin when done
		srv.Stop()
	}()
	fmt.Println(hello)
	if err := srv.Serve(ln); err != nil {
		return fail(err)
	}
	return 0
}

// selfSignedCert returns a fresh certificate and key of the kind
// go-plugin's AutoMTLS generates for each side: ECDSA P-521, self-signed,
// for "localhost".
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement | x509.KeyUsageCertSign,
		NotBefore:   time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// bareGRPC is a running baseline server process and a client connected
// to it.
type bareGRPC struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	conn   *grpc.ClientConn
	client pb.DriverClient
}

// startBareGRPC starts the test binary as a bare gRPC server on a Unix
// socket in a fresh directory and connects to it, with mutual TLS when
// withTLS is set, and with gRPC's default options or, when tuned is set,
// the plugin transport's (plugin.DialOptions, plugin.ServerOptions).
func startBareGRPC(b *testing.B, withTLS, tuned bool) *bareGRPC {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "grpc.sock")
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), grpcSocketEnv+"="+sock)
	if tuned {
		cmd.Env = append(cmd.Env, grpcTunedEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	var clientCert tls.Certificate
	if withTLS {
		if clientCert, err = selfSignedCert(); err != nil {
			b.Fatal(err)
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientCert.Certificate[0]})
		cmd.Env = append(cmd.Env, grpcClientCertEnv+"="+string(certPEM))
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &bareGRPC{cmd: cmd, stdin: stdin}
	b.Cleanup(s.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("bare gRPC server: %v", err)
	}
	creds := insecure.NewCredentials()
	if line = strings.TrimSpace(line); line != "plain" {
		der, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			b.Fatal(err)
		}
		serverCert, err := x509.ParseCertificate(der)
		if err != nil {
			b.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(serverCert)
		creds = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{clientCert}, RootCAs: pool,
			MinVersion: tls.VersionTLS12, ServerName: "localhost"})
	}
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20))}
	if tuned {
		opts = plugin.DialOptions()
	}
	s.conn, err = grpc.NewClient("unix://"+sock, append(opts, grpc.WithTransportCredentials(creds))...)
	if err != nil {
		b.Fatal(err)
	}
	s.client = pb.NewDriverClient(s.conn)
	return s
}

func (s *bareGRPC) stop() {
	if s.conn != nil {
		s.conn.Close()
	}
	s.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}
