// cuDNN as the CUDA emulator provides it (tests/cuda_emu): the legacy convolution API the project
// calls (descriptors, algorithm heuristics and search, workspace sizes, forward, backward data,
// backward filter, cudnnAddTensor), computed by plain loops in double on the stream's turn. Every
// query offers two algorithms: 1, non-deterministic and needing a workspace, first, then 0,
// deterministic and needing none; a call given less workspace than its algorithm needs fails.
#pragma once
#include <cuda_runtime.h>

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 19
#define CUDNN_PATCHLEVEL 0
#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
#define CUDNN_DEPRECATED

enum cudnnStatus_t {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_NOT_INITIALIZED = 1001,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_INTERNAL_ERROR = 4000,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
};
enum cudnnDataType_t { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1, CUDNN_DATA_HALF = 2, CUDNN_DATA_BFLOAT16 = 9 };
enum cudnnTensorFormat_t { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 };
enum cudnnConvolutionMode_t { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 };
enum cudnnMathType_t {
  CUDNN_DEFAULT_MATH = 0,
  CUDNN_TENSOR_OP_MATH = 1,
  CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  CUDNN_FMA_MATH = 3,
};
enum cudnnDeterminism_t { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 };
enum cudnnConvolutionFwdAlgo_t {
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8,
};
enum cudnnConvolutionBwdDataAlgo_t {
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6,
};
enum cudnnConvolutionBwdFilterAlgo_t {
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 = 1,
  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 7,
};
struct cudnnConvolutionFwdAlgoPerf_t {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};
struct cudnnConvolutionBwdDataAlgoPerf_t {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};
struct cudnnConvolutionBwdFilterAlgoPerf_t {
  cudnnConvolutionBwdFilterAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
};

typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;

size_t cudnnGetVersion();
const char* cudnnGetErrorString(cudnnStatus_t s);
cudnnStatus_t cudnnCreate(cudnnHandle_t* h);
cudnnStatus_t cudnnDestroy(cudnnHandle_t h);
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s);

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d);
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d);
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d);
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m);

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                     cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                                     cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf);
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t, cudnnTensorDescriptor_t x, const void* xp,
                                                     cudnnFilterDescriptor_t w, const void* wp,
                                                     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y,
                                                     void* yp, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf, void* ws, size_t ws_bytes);
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                      cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                                                      cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t a,
                                                      size_t* bytes);
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x, const void* xp,
                                      cudnnFilterDescriptor_t w, const void* wp, cudnnConvolutionDescriptor_t c,
                                      cudnnConvolutionFwdAlgo_t a, void* ws, size_t ws_bytes, const void* beta,
                                      cudnnTensorDescriptor_t y, void* yp);

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                          cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
                                                          cudnnTensorDescriptor_t dx, int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t, cudnnFilterDescriptor_t w, const void* wp,
                                                          cudnnTensorDescriptor_t dy, const void* dyp,
                                                          cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx,
                                                          void* dxp, int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf, void* ws,
                                                          size_t ws_bytes);
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, cudnnFilterDescriptor_t w,
                                                           cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
                                                           cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t a,
                                                           size_t* bytes);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void* alpha, cudnnFilterDescriptor_t w,
                                           const void* wp, cudnnTensorDescriptor_t dy, const void* dyp,
                                           cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t a, void* ws,
                                           size_t ws_bytes, const void* beta, cudnnTensorDescriptor_t dx, void* dxp);

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                            cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
                                                            cudnnFilterDescriptor_t dw, int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf);
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t, cudnnTensorDescriptor_t x, const void* xp,
                                                            cudnnTensorDescriptor_t dy, const void* dyp,
                                                            cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw,
                                                            void* dwp, int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf, void* ws,
                                                            size_t ws_bytes);
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t, cudnnTensorDescriptor_t x,
                                                             cudnnTensorDescriptor_t dy, cudnnConvolutionDescriptor_t c,
                                                             cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes);
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t x,
                                             const void* xp, cudnnTensorDescriptor_t dy, const void* dyp,
                                             cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t a,
                                             void* ws, size_t ws_bytes, const void* beta, cudnnFilterDescriptor_t dw,
                                             void* dwp);

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void* alpha, cudnnTensorDescriptor_t a, const void* ap,
                             const void* beta, cudnnTensorDescriptor_t c, void* cp);
