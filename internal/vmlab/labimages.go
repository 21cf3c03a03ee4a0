package vmlab

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/imagecache/oci"
)

// labImagesPath is where the lab's conductor serves its image cache on
// the agent API listener.
const labImagesPath = "/images/"

// startImageCache makes the lab conductor's image cache in dir, serving
// at urlBase, and the direct deploy's options with it. Registries are
// reached over HTTP (the tests' registry listens on the host's
// loopback). Close closes it.
func (lab *Lab) startImageCache(dir, urlBase string, logger *slog.Logger) (*imagecache.Cache, agentdeploy.Options, error) {
	resolver := oci.NewResolver(oci.Options{PermitHTTPFallback: true})
	c, err := imagecache.New(imagecache.Options{Dir: filepath.Join(dir, "master_images"), URLBase: urlBase, OCI: resolver,
		Logger: logger.With("component", "imagecache")})
	if err != nil {
		return nil, agentdeploy.Options{}, err
	}
	lab.cleanup(c.Close)
	lab.images = c
	return c, agentdeploy.Options{Images: c, OCI: resolver, ForceRawImages: true}, nil
}

// withImages serves the image cache's URLs beside the agent API.
func withImages(api http.Handler, images *imagecache.Cache) http.Handler {
	h := images.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, labImagesPath) {
			h.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// ImageCache is the lab conductor's image cache.
func (lab *Lab) ImageCache() *imagecache.Cache { return lab.images }
